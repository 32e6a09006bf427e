"""A held job reserves no credits: its hold's remainder goes back to the organization's
wallets, what it spent stays spent, and its release holds what it may still cost again,
refused (402, the job still held) as a submission is when the credits or a budget no longer
cover it. Attacked: releases past the balance, a job that ran before, a batch that runs out,
and holds, releases and submissions racing on a tight balance (invariant: no credit is made
or lost, no wallet goes below zero, a job holds credits exactly while it may be placed)."""

from datetime import timedelta
from functools import partial

import pytest
from django.utils import timezone

from credits.models import Budget, GpuPrice, Hold
from credits.services.grants import credits_grant
from credits.services.holds import job_credits
from jobs.models import Attempt, Job
from jobs.services.job_hold import job_hold, job_release
from jobs.services.submission import JobSpec, job_submit
from jobs.states import JobState
from jobs.transitions import transition
from tests.support.factories import make_node, start_placed
from tests.support.ledger import assert_ledger_consistent, wallet_of
from tests.support.race import race
from workers.services.attempts import AttemptResult, attempt_finish

pytestmark = pytest.mark.django_db(transaction=True)
GRANT = 10_000


@pytest.fixture
def funded(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=GRANT)
    return alice


def _submit(org, limit: int = 600, **spec) -> Job:
    return job_submit(organization=org, spec=JobSpec(prompt="a heron", time_limit_s=limit,
                                                     **spec))


def _available(org) -> int:
    return wallet_of(org).available


def _open(job: Job) -> int:
    return sum(h.remaining for h in Hold.objects.filter(job=job, closed_at__isnull=True))


def test_a_held_job_reserves_nothing_and_its_release_holds_it_again(api, funded):
    job_id = api.post("/api/v1/jobs", {"prompt": "x", "time_limit_s": 600},
                      format="json").json()["id"]
    assert _available(funded) == GRANT - 600
    held = api.post(f"/api/v1/jobs/{job_id}/hold").json()
    assert held["state"] == "HELD" and _available(funded) == GRANT
    assert api.get(f"/api/v1/jobs/{job_id}").json()["credits"] == {
        "held": 0, "spent": 0, "refunded": 0}
    assert api.post(f"/api/v1/jobs/{job_id}/release").json()["state"] == "QUEUED"
    assert _available(funded) == GRANT - 600 and _open(Job.objects.get(pk=job_id)) == 600
    api.post(f"/api/v1/jobs/{job_id}/hold")
    assert api.post(f"/api/v1/jobs/{job_id}/cancel").json()["state"] == "CANCELLED"
    assert _available(funded) == GRANT and Job.objects.get(pk=job_id).hold == ""
    assert_ledger_consistent()


@pytest.mark.parametrize("spend_by", ["another_job", "a_budget"])
def test_a_release_the_credits_no_longer_cover_is_refused_and_the_job_stays_held(
        api, funded, spend_by):
    job = _submit(funded)
    job_hold(job=job)
    if spend_by == "another_job":
        _submit(funded, limit=GRANT - 500)
        code = "insufficient_credits"
    else:
        Budget.objects.create(organization=funded, monthly_limit=500)
        code = "budget_exceeded"
    refused = api.post(f"/api/v1/jobs/{job.pk}/release")
    assert refused.status_code == 402, refused.content
    error = refused.json()["error"]
    assert error["code"] == code and f"job {job.pk} stays held" in error["message"]
    job.refresh_from_db()
    assert (job.state, job.hold, _open(job)) == ("HELD", "client", 0)
    assert not job.events.filter(to_state="QUEUED").exclude(from_state="").exists()
    assert_ledger_consistent()


def test_a_job_that_ran_before_holds_again_only_what_it_may_still_cost(funded):
    make_node("n1", gpus=2)
    job = _submit(funded, limit=3600, gpus=2, checkpointable=True)
    attempt = start_placed(job)
    now = timezone.now()  # it ran 300 s and kept the first 100 in a checkpoint
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=now - timedelta(seconds=300), last_checkpoint_at=now - timedelta(seconds=200))
    transition(Job.objects.get(pk=job.pk), JobState.PREEMPTING, reason="test")
    job = attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                         result=AttemptResult("PREEMPTED", 1))
    spent = job_credits(job)["spent"]
    assert job.state == "QUEUED" and 200 <= spent <= 202  # two GPUs, 100 s
    job_hold(job=job)
    assert _open(job) == 0 and _available(funded) == GRANT - spent
    job_release(job=Job.objects.get(pk=job.pk))
    assert _open(job) == 2 * 3600 - spent  # its most, less what it spent: never more
    assert_ledger_consistent()


def test_a_job_held_with_its_credits_still_held_is_not_held_for_twice(funded):
    job = _submit(funded)
    Job.objects.filter(pk=job.pk).update(state="HELD", hold="client")  # held before the change
    job_release(job=Job.objects.get(pk=job.pk))
    assert Hold.objects.filter(job=job).count() == 1 and _available(funded) == GRANT - 600


def test_a_batch_release_stops_at_the_first_job_the_credits_do_not_cover(api, funded):
    ids = [_submit(funded, labels={"batch": "b7"}).pk for _ in range(3)]
    assert api.post("/api/v1/jobs/hold", {"label": ["batch:b7"]},
                    format="json").json()["held"] == ids
    _submit(funded, limit=GRANT - 1_000)  # room for one of them
    released = api.post("/api/v1/jobs/release", {"label": ["batch:b7"]}, format="json").json()
    assert released["released"] == ids[:1] and released["left"] == 2
    assert released["refused"]["code"] == "insufficient_credits"
    assert (released["refused"]["needed"], released["refused"]["available"]) == (600, 400)
    assert [Job.objects.get(pk=pk).state for pk in ids] == ["QUEUED", "HELD", "HELD"]
    assert_ledger_consistent()


def test_holds_releases_and_submissions_racing_on_a_tight_balance_lose_nothing(funded):
    jobs = [_submit(funded, limit=2_000) for _ in range(4)]  # 8,000 of 10,000 held

    def flip(job: Job, last: tuple = ()) -> None:
        for act in (job_hold, job_release) * 3 + last:
            try:
                act(job=Job.objects.get(pk=job.pk))
            except Exception as exc:  # noqa: BLE001 - a refusal, checked by its code
                assert getattr(exc, "code", None) in {
                    "job_not_held", "insufficient_credits", "busy"}, exc

    def submit() -> None:
        for _ in range(3):
            try:
                _submit(funded, limit=1_500)
            except Exception as exc:  # noqa: BLE001 - a refusal, checked by its code
                assert getattr(exc, "code", None) == "insufficient_credits", exc

    assert race(*(partial(flip, job, (job_hold,) * (i % 2))  # half of them end held
                  for i, job in enumerate(jobs)), submit) == []
    assert_ledger_consistent()
    assert Job.objects.filter(state="HELD").count() >= 2
    for job in Job.objects.all():
        assert _open(job) == (0 if job.state == "HELD" else job.time_limit_s), job.pk
    assert _available(funded) == GRANT - sum(_open(job) for job in Job.objects.all())
