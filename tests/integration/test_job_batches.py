"""POST /api/v1/jobs/batch: many jobs in one request, all or none. Attacked: a bad job among
good ones, credits or a queue limit that run out part-way, a retried batch, the same key
with another batch, racing batches against one queue limit, and any body at all (invariant
1: only an accepted batch leaves jobs, every one of them; invariant 5: a refused batch holds
no credit)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credits.models import GpuPrice, Hold
from credits.services.grants import credits_grant
from jobs.models import Job, Tier
from jobs.services.batches import MAX_BATCH, jobs_submit_batch
from jobs.services.errors import ServiceError
from jobs.services.submission import JobSpec
from tests.support.ledger import assert_ledger_consistent
from tests.support.request_bodies import with_prompt
from tests.support.threads import race

pytestmark = pytest.mark.django_db


def _batch(api, jobs, key: str = ""):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return api.post("/api/v1/jobs/batch", {"jobs": jobs}, format="json", **headers)


def test_a_batch_queues_its_jobs_in_order(api, alice):
    answer = _batch(api, [{"prompt": f"shot {i}", "gpus": 1 + i % 2, "labels": {"b": "1"}}
                          for i in range(5)])
    assert answer.status_code == 202, answer.content
    made = answer.json()["jobs"]
    assert [j["state"] for j in made] == ["QUEUED"] * 5
    assert [j["id"] for j in made] == sorted(j["id"] for j in made)
    jobs = {j.pk: j for j in Job.objects.all()}
    assert [(jobs[j["id"]].prompt, jobs[j["id"]].gpus) for j in made] == [
        (f"shot {i}", 1 + i % 2) for i in range(5)]


def test_a_bad_job_among_good_ones_keeps_none_and_is_named(api, alice):
    answer = _batch(api, [{"prompt": "a"}, {"prompt": "b", "gpus": 99}, {"prompt": "c"}])
    assert answer.status_code == 400
    assert list(answer.json()["error"]["fields"]["jobs"]) == ["1"]  # the bad one, by index
    assert "gpus" in answer.json()["error"]["fields"]["jobs"]["1"]
    assert not Job.objects.exists()
    past = _batch(api, [{"prompt": "a"}, {"prompt": "b", "project": "nope"}])
    assert past.json()["error"]["code"] == "unknown_project"
    assert past.json()["error"]["index"] == 1 and not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_credits_that_run_out_part_way_keep_none_and_hold_nothing(api, alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=2_500)  # two jobs of 1,000, not three
    answer = _batch(api, [{"prompt": "x", "time_limit_s": 1_000}] * 3)
    assert answer.status_code == 402
    assert (answer.json()["error"]["code"], answer.json()["error"]["index"]) == (
        "insufficient_credits", 2)
    assert not Job.objects.exists() and not Hold.objects.exists()
    assert_ledger_consistent()


def test_a_queue_limit_that_runs_out_part_way_keeps_none(api, alice):
    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=3)
    api.post("/api/v1/jobs", {"prompt": "first"}, format="json")
    answer = _batch(api, [{"prompt": "x"}] * 3)
    assert answer.status_code == 429 and answer.json()["error"]["code"] == "queue_full"
    assert answer.json()["error"]["index"] == 2 and Job.objects.count() == 1
    assert _batch(api, [{"prompt": "x"}] * 2).status_code == 202


def test_a_retried_batch_gets_its_jobs_and_the_key_with_another_batch_is_refused(api, alice):
    first = _batch(api, [{"prompt": "a"}, {"prompt": "b"}], key="k1")
    again = _batch(api, [{"prompt": "a"}, {"prompt": "b"}], key="k1")
    assert again.status_code == 202 and again["Idempotent-Replayed"] == "true"
    assert again.json()["jobs"] == first.json()["jobs"] and Job.objects.count() == 2
    for other in ([{"prompt": "a"}, {"prompt": "c"}], [{"prompt": "a"}],
                  [{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}]):
        refused = _batch(api, other, key="k1")
        assert refused.status_code == 409, other
        assert refused.json()["error"]["code"] == "idempotency_key_reused"
    assert Job.objects.count() == 2


@pytest.mark.parametrize("jobs", [[], [{"prompt": "x"}] * (MAX_BATCH + 1), "x", [1]])
def test_a_batch_of_no_jobs_or_too_many_is_refused(api, alice, jobs):
    answer = _batch(api, jobs)
    assert answer.status_code == 400 and not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_racing_batches_never_pass_the_queue_limit_together(alice):
    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=10)
    outcomes = []

    def submit() -> None:
        try:
            outcomes.append(len(jobs_submit_batch(organization=alice,
                                                  specs=[JobSpec(prompt="x")] * 4)[0]))
        except ServiceError as exc:
            outcomes.append(exc.code)

    race(submit, 4)
    assert sorted(outcomes, key=str) == [4, 4, "queue_full", "queue_full"]
    assert Job.objects.count() == 8


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(with_prompt, max_size=4))
def test_any_batch_is_accepted_whole_or_refused_with_a_code(api, jobs):
    before = Job.objects.count()
    answer = api.post("/api/v1/jobs/batch", json.dumps({"jobs": jobs}),
                      content_type="application/json")
    assert answer.status_code in (202, 400), answer.content[:300]
    made = Job.objects.count() - before
    assert made == (len(jobs) if answer.status_code == 202 else 0)
    if answer.status_code == 400:
        assert answer.json()["error"]["code"]


def test_a_pipeline_sent_as_one_batch_runs_its_steps_after_each_other(api, alice):
    answer = _batch(api, [{"prompt": "render"}, {"prompt": "upscale", "after_batch": [0]},
                          {"prompt": "caption", "after_batch": [0, 1], "after": []}])
    assert answer.status_code == 202, answer.content
    ids = [j["id"] for j in answer.json()["jobs"]]
    assert [j["state"] for j in answer.json()["jobs"]] == ["QUEUED", "HELD", "HELD"]
    assert api.get(f"/api/v1/jobs/{ids[2]}").json()["after"] == ids[:2]
    again = _batch(api, [{"prompt": "render"}, {"prompt": "upscale", "after_batch": [0]},
                         {"prompt": "caption", "after_batch": [0, 1]}], key="p")
    assert _batch(api, [{"prompt": "render"}, {"prompt": "upscale", "after_batch": [0]},
                        {"prompt": "caption", "after_batch": [0, 1]}],
                  key="p").json()["jobs"] == again.json()["jobs"]  # a retry finds them


@pytest.mark.parametrize("after_batch", [[1], [2], [-1]])
def test_a_job_may_run_after_earlier_jobs_of_its_batch_only(api, alice, after_batch):
    answer = _batch(api, [{"prompt": "a"}, {"prompt": "b", "after_batch": after_batch}])
    assert answer.status_code == 400 and not Job.objects.exists()
    error = answer.json()["error"]
    assert error["code"] in ("invalid_after_batch", "invalid")
    if error["code"] == "invalid_after_batch":
        assert error["index"] == 1
