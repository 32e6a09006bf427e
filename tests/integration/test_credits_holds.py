"""Invariant 5 at intake: a job reserves what it may cost, or is refused with a 402 and
nothing is queued or moved; racing submissions never overdraw; a retried submission holds once.
"""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from credits.models import Account, GpuPrice, Hold, Transfer
from credits.services.grants import credits_grant
from jobs.models import Job
from jobs.services.submission import JobSpec, job_submit, job_submit_once
from tests.support.ledger import assert_ledger_consistent, wallet_of
from tests.support.threads import race

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def priced(db):
    """One credit per H100-second, half that for an A100."""
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    GpuPrice.objects.create(gpu_type="A100", credits_per_gpu_hour=1800)


def _spec(gpus=1, limit=600, **more) -> JobSpec:
    return JobSpec(prompt="a heron", gpus=gpus, time_limit_s=limit, **more)


def test_a_job_holds_the_most_it_may_cost(alice, priced):
    credits_grant(organization=alice, amount=10_000)
    job = job_submit(organization=alice, spec=_spec(gpus=2, limit=600))
    # the dearest type it accepts (any: H100), for its whole time limit
    assert Hold.objects.get(job=job).amount == 2 * 600
    cheap = job_submit(organization=alice, spec=_spec(gpus=2, limit=600, gpu_types=("A100",)))
    assert Hold.objects.get(job=cheap).amount == 600
    wallet = wallet_of(alice)
    assert (wallet.available, wallet.debits_pending, wallet.balance) == (8_200, 1_800, 10_000)
    assert_ledger_consistent()


def test_a_job_it_cannot_pay_for_is_a_402_and_nothing_moves(alice, api, priced, caplog):
    caplog.set_level("INFO", logger="jobs.metrics")
    credits_grant(organization=alice, amount=500)
    answer = api.post("/api/v1/jobs", {"prompt": "a heron", "gpus": 1, "time_limit_s": 600},
                      format="json")
    assert answer.status_code == 402
    assert answer.json()["error"] == {
        "code": "insufficient_credits", "needed": 600, "available": 500,
        "message": "this job may cost 600 credits and 500 are available"}
    assert Job.objects.count() == 0 and Hold.objects.count() == 0
    assert Transfer.objects.exclude(kind="GRANT").count() == 0
    assert wallet_of(alice).available == 500
    assert_ledger_consistent()
    # the decision is in the logs, with its figures
    (refusal,) = [r for r in caplog.records if getattr(r, "refusal", None)]
    assert (refusal.refusal, refusal.organization_id, refusal.needed, refusal.available) == (
        "insufficient_credits", alice.pk, 600, 500)


def test_without_a_price_a_job_needs_no_credits(alice):
    job = job_submit(organization=alice, spec=_spec())
    assert job.state == "QUEUED" and not Hold.objects.exists()


def test_promotional_credits_are_spent_first_and_a_hold_may_span_buckets(alice, priced):
    credits_grant(organization=alice, amount=1_000)
    credits_grant(organization=alice, amount=500, promo=True)
    job = job_submit(organization=alice, spec=_spec(gpus=2, limit=600))
    holds = {h.account.bucket: h.amount for h in Hold.objects.filter(job=job)}
    assert holds == {"promo": 500, "paid": 700}
    assert wallet_of(alice, "promo").available == 0 and wallet_of(alice).available == 300
    assert_ledger_consistent()


def test_a_job_holds_on_a_leap_day_from_the_wallet_expiring_first(alice, priced,
                                                                   monkeypatch):
    leap = datetime(2028, 2, 29, 12, tzinfo=UTC)  # a date with no twin in most years
    credits_grant(organization=alice, amount=1_000)  # never expires
    credits_grant(organization=alice, amount=400, promo=True, expires_at=leap + timedelta(9))
    credits_grant(organization=alice, amount=400, promo=True, expires_at=leap + timedelta(1))
    monkeypatch.setattr(timezone, "now", lambda: leap)
    job = job_submit(organization=alice, spec=_spec(gpus=1, limit=1_000))
    drawn = [(h.account.expires_at, h.amount) for h in Hold.objects.filter(job=job)
             .select_related("account").order_by("pk")]
    assert drawn == [(leap + timedelta(1), 400), (leap + timedelta(9), 400), (None, 200)]
    assert_ledger_consistent()


def test_racing_submissions_never_overdraw(alice, priced):
    credits_grant(organization=alice, amount=5 * 600 + 599)  # five jobs and most of a sixth
    outcomes = []

    def submit():
        try:
            job_submit(organization=alice, spec=_spec())
            outcomes.append("queued")
        except Exception as exc:  # noqa: BLE001 - the refusal is what is counted
            outcomes.append(getattr(exc, "code", repr(exc)))

    race(submit, 10)
    assert sorted(outcomes) == ["insufficient_credits"] * 5 + ["queued"] * 5
    assert Job.objects.count() == 5
    assert wallet_of(alice).available == 599
    assert_ledger_consistent()


def test_a_retried_submission_holds_once(alice, priced):
    credits_grant(organization=alice, amount=10_000)

    def submit():
        job_submit_once(organization=alice, spec=_spec(), idempotency_key="k-1")

    race(submit, 6)
    assert Job.objects.count() == 1 and Hold.objects.count() == 1
    assert wallet_of(alice).available == 10_000 - 600
    assert_ledger_consistent()


def test_an_expired_promotion_pays_for_nothing(alice, priced):
    credits_grant(organization=alice, amount=5_000, promo=True,
                  expires_at="2001-01-01T00:00:00Z")
    with pytest.raises(Exception) as refused:
        job_submit(organization=alice, spec=_spec())
    assert refused.value.code == "insufficient_credits"
    assert Account.objects.get(bucket="promo").available == 5_000  # still there until swept


def test_a_retry_of_an_accepted_job_is_its_job_even_when_credits_ran_out(alice, priced):
    credits_grant(organization=alice, amount=600)
    job, replayed = job_submit_once(organization=alice, spec=_spec(), idempotency_key="k-2")
    assert not replayed and wallet_of(alice).available == 0
    again, replayed = job_submit_once(organization=alice, spec=_spec(), idempotency_key="k-2")
    assert (again.pk, replayed) == (job.pk, True)  # the same effect as one request: no 402
    assert Hold.objects.count() == 1
    assert_ledger_consistent()
