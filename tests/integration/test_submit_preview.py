"""`POST /api/v1/jobs?dry_run=true` answers what the same submission would do now, admitted
or refused as it would be, and keeps nothing: no job, no hold, no event, no budget spent, no
refusal counted."""

import pytest
from django.core.cache import cache

from credits.models import Budget, GpuPrice, Hold, Transfer
from credits.services.grants import credits_grant
from credits.services.statements import organization_balance
from jobs.metrics import _REFUSED_KEY
from jobs.models import Job, JobEvent, Tier
from tests.support.factories import make_job

pytestmark = pytest.mark.django_db
BODY = {"prompt": "a lighthouse at dusk", "gpus": 2, "time_limit_s": 1_800}


@pytest.fixture
def priced(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3_600)
    credits_grant(organization=alice, amount=10_000)


def _stored() -> tuple:
    return (Job.objects.count(), JobEvent.objects.count(), Hold.objects.count(),
            Transfer.objects.count(), list(Budget.objects.values_list("pk", "monthly_limit")))


def test_it_says_what_would_be_held_and_keeps_nothing(api, alice, priced):
    before, balance = _stored(), organization_balance(alice)["available"]
    answer = api.post("/api/v1/jobs?dry_run=true", BODY, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["dry_run"] is True and body["state"] == "QUEUED"
    assert body["credits"] == {"hold": 3_600, "available_after": balance - 3_600}
    assert _stored() == before and organization_balance(alice)["available"] == balance
    real = api.post("/api/v1/jobs", BODY, format="json")  # the same request, for real
    assert real.status_code == 202
    assert organization_balance(alice)["available"] == body["credits"]["available_after"]


def test_a_job_after_another_would_wait_held(api, alice):
    first = make_job(alice)
    body = api.post("/api/v1/jobs?dry_run=1", {"prompt": "x", "after": [first.pk]},
                    format="json").json()
    assert body["state"] == "HELD" and Job.objects.count() == 1


def _refused_count(code: str) -> int:
    return cache.get(_REFUSED_KEY.format(code)) or 0


def test_it_is_refused_as_the_submission_would_be_and_counts_no_refusal(api, alice, priced,
                                                                        clean_cache):
    too_dear = {**BODY, "gpus": 8}  # 14,400 credits against 10,000
    before = _stored()
    dry = api.post("/api/v1/jobs?dry_run=true", too_dear, format="json")
    assert (dry.status_code, dry.json()["error"]["code"]) == (402, "insufficient_credits")
    assert _refused_count("insufficient_credits") == 0 and _stored() == before
    real = api.post("/api/v1/jobs", too_dear, format="json")
    assert real.json()["error"] == dry.json()["error"]
    assert _refused_count("insufficient_credits") == 1

    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=0)
    full = api.post("/api/v1/jobs?dry_run=true", BODY, format="json")
    assert (full.status_code, full.json()["error"]["code"]) == (429, "queue_full")
    assert "Retry-After" in full and _refused_count("queue_full") == 0


def test_a_budget_it_would_pass_is_refused_and_left_as_it_was(api, alice, priced):
    Budget.objects.create(organization=alice, monthly_limit=1_000)
    answer = api.post("/api/v1/jobs?dry_run=true", BODY, format="json")
    assert (answer.status_code, answer.json()["error"]["code"]) == (402, "budget_exceeded")
    assert Job.objects.count() == 0


@pytest.mark.parametrize("value", ["yes", "2", ""])
def test_dry_run_is_true_or_false(api, value):
    answer = api.post(f"/api/v1/jobs?dry_run={value}", BODY, format="json")
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid")
    assert Job.objects.count() == 0
