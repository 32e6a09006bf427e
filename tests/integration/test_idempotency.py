"""A submission retried with the same Idempotency-Key makes one job (DESIGN invariant 5's
retry rule, on intake): the retry gets that job back, even racing the first, even past the
queue limit; the same key with another request is a 409 and makes nothing."""

import pytest
from rest_framework.test import APIClient

from jobs.models import Job, Tier
from jobs.services.submission import JobSpec, job_submit_once
from tests.support.threads import race


def _post(api, key, **body):
    return api.post("/api/v1/jobs", {"prompt": "a fox", **body}, format="json",
                    HTTP_IDEMPOTENCY_KEY=key)


@pytest.mark.django_db
def test_a_retried_submission_gets_the_same_job(api):
    first, again = _post(api, "k-1", gpus=2), _post(api, "k-1", gpus=2)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Job.objects.count() == 1
    assert _post(api, "k-2", gpus=2).json()["id"] != first.json()["id"]  # a new key, a new job


@pytest.mark.django_db
def test_the_same_key_with_another_request_is_a_409(api):
    _post(api, "k-1", gpus=2)
    reused = _post(api, "k-1", gpus=4)
    assert reused.status_code == 409
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_keys_belong_to_one_organization(api, bob):
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    assert _post(api, "k-1").json()["id"] != _post(other, "k-1").json()["id"]


@pytest.mark.django_db
def test_a_retry_past_the_queue_limit_still_gets_its_job(api):
    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=1)
    first = _post(api, "k-1")
    assert _post(api, "k-2").status_code == 429
    assert _post(api, "k-1").json()["id"] == first.json()["id"]


@pytest.mark.django_db
def test_an_overlong_key_is_a_400(api):
    response = _post(api, "k" * 256)
    assert (response.status_code, response.json()["error"]["code"]) == (
        400, "invalid_idempotency_key")
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_racing_retries_make_one_job(alice):
    ids = []
    race(lambda: ids.append(job_submit_once(organization=alice, spec=JobSpec(prompt="x"),
                                            idempotency_key="k-race")[0].pk), 8)
    assert len(ids) == 8 and len(set(ids)) == 1
    assert Job.objects.filter(organization=alice).count() == 1


@pytest.mark.django_db
def test_a_job_accepted_before_min_gpus_existed_is_found_by_its_retry(api):
    """Fingerprints stored before `min_gpus` was a field (no such key) still match a retry
    that does not name it; one that names it asks for something else."""
    import hashlib
    import json

    job = Job.objects.get(pk=_post(api, "k-old", gpus=2).json()["id"])
    old_spec = {"prompt": "a fox", "gpus": 2, "params": {}, "gpu_types": [],
                "min_gpu_memory_mb": 0, "region": "", "time_limit_s": None,
                "checkpointable": False, "preemptible": True, "project": ""}
    text = json.dumps(old_spec, sort_keys=True, separators=(",", ":"))
    assert job.request_fingerprint == hashlib.sha256(text.encode()).hexdigest()
    assert _post(api, "k-old", gpus=2).json()["id"] == job.pk
    assert _post(api, "k-old", gpus=2, min_gpus=1).status_code == 409
