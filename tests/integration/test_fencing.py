"""Invariant 3: a duplicate or stale token can neither start, renew, report nor publish."""

import pytest

from jobs.models import Attempt, GpuBinding, Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from tests.support.factories import make_job, make_node
from workers.services.attempts import (
    AttemptResult,
    StaleAttempt,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def scheduled(alice):
    make_node(gpus=2)
    job = make_job(alice, gpus=2)
    assert scheduler_tick_run().applied.placed == 1
    return Attempt.objects.get(job=job)


def test_a_second_start_with_the_same_token_is_refused(scheduled):
    attempt_start(attempt_id=scheduled.pk, token=scheduled.token)
    with pytest.raises(StaleAttempt):
        attempt_start(attempt_id=scheduled.pk, token=scheduled.token)
    assert Job.objects.get(pk=scheduled.job_id).events.filter(to_state="RUNNING").count() == 1


def test_a_wrong_token_can_not_start_renew_or_report(scheduled):
    with pytest.raises(StaleAttempt):
        attempt_start(attempt_id=scheduled.pk, token=scheduled.token - 1)
    attempt_start(attempt_id=scheduled.pk, token=scheduled.token)
    assert attempt_heartbeat(attempt_id=scheduled.pk, token=scheduled.token + 1).action == "stale"
    with pytest.raises(StaleAttempt):
        attempt_finish(attempt_id=scheduled.pk, token=scheduled.token + 1,
                       result=AttemptResult("SUCCEEDED", 0))
    assert Job.objects.get(pk=scheduled.job_id).state == "RUNNING"


def test_a_reaped_attempt_is_fenced_off_and_its_job_runs_again(scheduled, settings):
    settings.GPUSCHED_RETRY_BACKOFF_S = 0
    attempt_start(attempt_id=scheduled.pk, token=scheduled.token)
    Attempt.objects.filter(pk=scheduled.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    scheduler_tick_run()  # reaps, then places the job again with a new token
    job = Job.objects.get(pk=scheduled.job_id)
    newer = Attempt.objects.get(job=job, ended_at__isnull=True)
    assert newer.token > scheduled.token and job.state == "SCHEDULED"
    # the old attempt comes back from a partition: every call is refused
    assert attempt_heartbeat(attempt_id=scheduled.pk, token=scheduled.token).action == "stale"
    with pytest.raises(StaleAttempt):
        attempt_finish(attempt_id=scheduled.pk, token=scheduled.token,
                       result=AttemptResult("SUCCEEDED", 0))
    assert GpuBinding.objects.filter(released_at__isnull=True, attempt=newer).count() == 2


def test_finishing_frees_the_gpus_exactly_once(scheduled):
    attempt_start(attempt_id=scheduled.pk, token=scheduled.token)
    attempt_finish(attempt_id=scheduled.pk, token=scheduled.token,
                   result=AttemptResult("FAILED", 2, "usage: bad", None, "exit_2"))
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    job = Job.objects.get(pk=scheduled.job_id)
    assert (job.state, job.error_code) == ("FAILED", "exit_2")
    with pytest.raises(StaleAttempt):
        attempt_finish(attempt_id=scheduled.pk, token=scheduled.token,
                       result=AttemptResult("SUCCEEDED", 0))


def _expire(attempt):
    Attempt.objects.filter(pk=attempt.pk).update(lease_expires_at="2000-01-01T00:00:00Z")


def test_a_lost_job_waits_out_its_backoff_before_it_runs_again(scheduled, settings):
    settings.GPUSCHED_RETRY_BACKOFF_S = 3600
    attempt_start(attempt_id=scheduled.pk, token=scheduled.token)
    _expire(scheduled)
    scheduler_tick_run()
    job = Job.objects.get(pk=scheduled.job_id)
    assert (job.state, job.retries) == ("RETRY_WAIT", 1) and job.retry_at is not None
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


def test_a_job_its_node_never_started_queues_again_at_once_without_a_retry(scheduled,
                                                                           settings):
    settings.GPUSCHED_RETRY_BACKOFF_S = 3600
    settings.GPUSCHED_MAX_RETRIES = 0  # one lost try would dead-letter it
    _expire(scheduled)  # its node's worker never took the message within the lease
    scheduler_tick_run()
    job = Job.objects.get(pk=scheduled.job_id)
    assert (job.state, job.retries, job.avoid_node) == ("SCHEDULED", 0, "n1")
    retry = job.events.get(to_state="RETRY_WAIT")
    assert "never started it" in retry.reason and "no retry counted" in retry.reason
    live = Attempt.objects.get(job=job, ended_at__isnull=True)
    assert live.pk != scheduled.pk  # placed again in the same round, once it queued


def test_a_cancel_is_not_lost_with_the_node(scheduled, settings):
    settings.GPUSCHED_RETRY_BACKOFF_S = 0
    attempt_start(attempt_id=scheduled.pk, token=scheduled.token)
    job_cancel(job=Job.objects.get(pk=scheduled.job_id))  # the node is asked to stop it...
    _expire(scheduled)  # ...but stops answering before it reports
    scheduler_tick_run()
    job = Job.objects.get(pk=scheduled.job_id)
    assert (job.state, job.error_code) == ("CANCELLED", "cancelled")
    assert Attempt.objects.filter(job=job).count() == 1  # not run again
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


def test_a_job_lost_too_often_is_dead_lettered(scheduled, settings):
    settings.GPUSCHED_MAX_RETRIES = 2
    Job.objects.filter(pk=scheduled.job_id).update(retries=2)
    attempt_start(attempt_id=scheduled.pk, token=scheduled.token)
    _expire(scheduled)
    scheduler_tick_run()
    job = Job.objects.get(pk=scheduled.job_id)
    assert (job.state, job.error_code) == ("DEAD", "retries_exhausted")
    assert Attempt.objects.filter(job=job).count() == 1
