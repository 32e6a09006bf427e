"""What a job pays: its kept GPU time at its GPUs' price, posted from its hold under the
attempt's fencing token, the rest voided once at its end; nothing for work a preemption or a
lost node threw away; everything back for a job that delivered nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from credits.models import GpuPrice, Hold, Transfer
from credits.services.grants import credits_grant
from credits.services.pricing import cost
from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.submission import JobSpec, job_submit
from jobs.states import JobState
from jobs.transitions import transition
from tests.support.factories import make_node
from tests.support.ledger import assert_ledger_consistent, wallet_of
from workers.services.attempts import (
    AttemptResult,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)

pytestmark = pytest.mark.django_db(transaction=True)
GRANT = 100_000


@pytest.fixture
def funded(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=GRANT)
    make_node("n1", gpus=4)
    return alice


def _running(org, *, gpus=2, ran_s=100, limit=3600, **spec) -> Attempt:
    """A job of `org` started on n1 `ran_s` seconds ago."""
    job = job_submit(organization=org, spec=JobSpec(prompt="a heron", gpus=gpus,
                                                    time_limit_s=limit, **spec))
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job, ended_at__isnull=True)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    _backdate(attempt, ran_s)
    return attempt


def _backdate(attempt: Attempt, seconds: float) -> None:
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=timezone.now() - timedelta(seconds=seconds))


def _finish(attempt: Attempt, outcome: str) -> Job:
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                          result=AttemptResult(outcome, 0 if outcome == "SUCCEEDED" else 1))


def _billed(attempt: Attempt) -> int:
    attempt.refresh_from_db()
    return cost(attempt.credits_per_hour, (attempt.ended_at - attempt.started_at).total_seconds())


def _posted(job) -> int:
    return sum(Transfer.objects.filter(job=job, kind="POST").values_list("amount", flat=True))


def test_a_succeeded_job_pays_its_run_and_gets_the_rest_of_its_hold_back(funded, api):
    attempt = _running(funded, gpus=2, ran_s=100)
    assert attempt.__class__.objects.get(pk=attempt.pk).credits_per_hour == 2 * 3600
    job = _finish(attempt, "SUCCEEDED")
    spent = _billed(attempt)
    assert 200 <= spent <= 202 and _posted(job) == spent
    hold = Hold.objects.get(job=job)
    assert hold.closed_at and hold.voided == hold.amount - spent
    wallet = wallet_of(funded)
    assert (wallet.balance, wallet.debits_pending) == (GRANT - spent, 0)
    assert_ledger_consistent()
    assert api.get(f"/api/v1/jobs/{job.pk}").json()["credits"] == {
        "held": 0, "spent": spent, "refunded": 0}


def test_a_checkpoint_posts_the_work_it_keeps_and_a_stale_token_posts_nothing(funded):
    attempt = _running(funded, gpus=1, ran_s=50)
    assert attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token + 1,
                             checkpointed=True).action == "stale"
    assert _posted(attempt.job) == 0
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    first = _posted(attempt.job)
    assert 50 <= first <= 51
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    assert _posted(attempt.job) in (first, first + 1)  # never the same seconds twice
    assert wallet_of(funded).debits_posted == _posted(attempt.job)
    assert_ledger_consistent()


def _timeline(attempt: Attempt, *, started_ago: float, checkpoint_ago: float) -> None:
    now = timezone.now()
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=now - timedelta(seconds=started_ago),
        last_checkpoint_at=now - timedelta(seconds=checkpoint_ago))


def _kept(attempt: Attempt) -> int:
    attempt.refresh_from_db()
    return cost(attempt.credits_per_hour,
                (attempt.last_checkpoint_at - attempt.started_at).total_seconds())


def test_work_lost_with_a_node_is_not_billed(funded, settings):
    settings.GPUSCHED_RETRY_BACKOFF_S = 0
    first = _running(funded, gpus=1, checkpointable=True)
    # it ran 300 s, checkpointed after 100, and its node went quiet
    _timeline(first, started_ago=300, checkpoint_ago=200)
    Attempt.objects.filter(pk=first.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    scheduler_tick_run()  # reaped: the kept 100 s are posted; retried at once
    kept = _kept(first)
    assert 100 <= kept <= 101 and _posted(first.job) == kept
    second = Attempt.objects.get(job=first.job, ended_at__isnull=True)
    attempt_start(attempt_id=second.pk, token=second.token)
    _backdate(second, 40)
    job = _finish(second, "SUCCEEDED")
    assert _posted(job) == kept + _billed(second)
    assert_ledger_consistent()


def test_a_preempted_attempt_pays_only_what_it_checkpointed(funded):
    attempt = _running(funded, gpus=2, checkpointable=True)
    _timeline(attempt, started_ago=500, checkpoint_ago=440)  # 60 s kept of 500 run
    transition(Job.objects.get(pk=attempt.job_id), JobState.PREEMPTING, reason="test")
    job = _finish(attempt, "PREEMPTED")
    assert job.state == "QUEUED" and _posted(job) == _kept(attempt)
    assert 120 <= _posted(job) <= 121  # two GPUs
    assert Hold.objects.get(job=job).closed_at is None  # still its to resume with
    assert_ledger_consistent()


def test_a_victim_that_checkpoints_as_it_stops_pays_its_whole_run(funded, settings):
    settings.GPUSCHED_STORE_CHECKPOINTS = False  # the work root every node shares holds it
    attempt = _running(funded, gpus=1, checkpointable=True)
    _timeline(attempt, started_ago=300, checkpoint_ago=250)
    transition(Job.objects.get(pk=attempt.job_id), JobState.PREEMPTING, reason="test")
    job = attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                         result=AttemptResult("PREEMPTED", 75))  # checkpointed on SIGTERM
    assert job.state == "QUEUED" and _posted(job) == _billed(attempt) >= 300


def test_a_victim_whose_checkpoint_at_the_stop_was_not_stored_pays_what_it_kept_before(
        funded, settings):
    """Its nodes' disks are their own: the checkpoint it wrote on SIGTERM, which could not
    be copied to storage, is no work a retry elsewhere resumes from."""
    settings.GPUSCHED_STORE_CHECKPOINTS = True
    attempt = _running(funded, gpus=1, checkpointable=True)
    _timeline(attempt, started_ago=300, checkpoint_ago=250)  # 50 s kept
    transition(Job.objects.get(pk=attempt.job_id), JobState.PREEMPTING, reason="test")
    job = attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                         result=AttemptResult("PREEMPTED", 75, checkpoint=""))
    assert job.state == "QUEUED" and _posted(job) == _kept(attempt)
    assert 50 <= _posted(job) <= 51


def test_checkpoints_post_at_most_once_a_meter_interval(funded, settings):
    settings.GPUSCHED_METER_INTERVAL_S = 60
    attempt = _running(funded, gpus=1, ran_s=100, checkpointable=True)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    first = _posted(attempt.job)
    assert 100 <= first <= 101
    _backdate(attempt, 130)  # 30 s more of run: inside the interval, not posted yet
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    assert _posted(attempt.job) == first
    Attempt.objects.filter(pk=attempt.pk).update(
        metered_until=timezone.now() - timedelta(seconds=61))  # the interval has passed
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    assert 130 <= _posted(attempt.job) <= 131
    assert Transfer.objects.filter(job=attempt.job, kind="POST").count() == 2
    assert_ledger_consistent()


@pytest.mark.parametrize("outcome", ["FAILED", "OOM"])
def test_a_job_that_delivered_nothing_is_refunded_in_full(funded, outcome):
    attempt = _running(funded, gpus=2, ran_s=80)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    assert _posted(attempt.job) > 0
    job = _finish(attempt, outcome)
    assert job.state == "FAILED"
    hold = Hold.objects.get(job=job)
    assert hold.refunded == hold.posted > 0 and hold.closed_at
    wallet = wallet_of(funded)
    assert (wallet.available, wallet.debits_pending) == (GRANT, 0)
    assert_ledger_consistent()


def test_a_dead_lettered_job_is_refunded(funded, settings):
    settings.GPUSCHED_MAX_RETRIES = 0
    attempt = _running(funded, gpus=1, ran_s=30, checkpointable=True)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    Attempt.objects.filter(pk=attempt.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    scheduler_tick_run()
    assert Job.objects.get(pk=attempt.job_id).state == "DEAD"
    assert wallet_of(funded).available == GRANT
    assert_ledger_consistent()


def test_a_job_never_pays_more_than_its_hold(funded):
    attempt = _running(funded, gpus=1, ran_s=900, limit=60)  # overran its limit tenfold
    job = _finish(attempt, "TIMED_OUT")
    assert _posted(job) == Hold.objects.get(job=job).amount == 60
    assert_ledger_consistent()


def test_a_price_change_does_not_reach_a_running_attempt(funded):
    attempt = _running(funded, gpus=1, ran_s=100)
    GpuPrice.objects.filter(gpu_type="H100").update(credits_per_gpu_hour=36_000)
    job = _finish(attempt, "SUCCEEDED")
    assert 100 <= _posted(job) <= 101


def test_a_cancelled_waiting_job_voids_its_hold_once(funded):
    job = job_submit(organization=funded, spec=JobSpec(prompt="x", gpus=8, time_limit_s=60))
    job_cancel(job=job)
    job_cancel(job=Job.objects.get(pk=job.pk))
    assert Transfer.objects.filter(job=job, kind="VOID").count() == 1
    assert wallet_of(funded).available == GRANT
    assert_ledger_consistent()


def test_a_job_cancelled_while_running_pays_what_it_ran(funded):
    attempt = _running(funded, gpus=1, ran_s=70)
    job_cancel(job=Job.objects.get(pk=attempt.job_id))
    job = _finish(attempt, "CANCELLED")
    assert job.state == "CANCELLED" and _posted(job) == _billed(attempt) >= 70
    assert_ledger_consistent()


def test_the_ledger_is_free_while_a_finished_attempt_copies_its_output(funded, settings,
                                                                         tmp_path):
    """Metering locks system:usage, which every ledger change of the fleet needs: the output
    is copied first, so another organization's submission is not held up by a video copy."""
    from django.db import OperationalError, transaction

    from credits.models import Account
    from tests.support.storage import ProbingStorage

    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "tests.support.storage.ProbingStorage",
        "OPTIONS": {"location": str(tmp_path / "media")}}}

    def usage_is_free() -> bool:
        try:
            with transaction.atomic():
                Account.objects.select_for_update(nowait=True).get(code="usage")
            return True
        except OperationalError:
            return False

    attempt = _running(funded, gpus=1, ran_s=10)
    output = tmp_path / "out.bin"
    output.write_bytes(b"frames")
    ProbingStorage.probe, ProbingStorage.results = usage_is_free, []
    try:
        attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                       result=AttemptResult("SUCCEEDED", 0, output_path=output))
    finally:
        ProbingStorage.probe = None
    assert ProbingStorage.results == [True]
    assert _posted(attempt.job) == _billed(attempt)
