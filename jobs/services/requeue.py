"""Send a running job back to the queue: its attempt is asked to checkpoint and stop, as a
preemption victim is, and the job waits again and resumes where it stopped. For operators:
a job on a node going into maintenance, or on GPUs they distrust."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.models import Attempt, AttemptStatus, Job
from jobs.services.errors import Conflict
from jobs.states import JobState
from jobs.transitions import TransitionError, transition


def attempt_stop_and_requeue(attempt: Attempt, *, reason: str, grace_s: float | None = None,
                             stop: str = "preempt", **job_fields) -> bool:
    """Ask a running attempt to stop within `grace_s` (the kill grace by default); its job
    goes PREEMPTING now (with `job_fields`) and QUEUED when the attempt reports, or HELD for
    a `stop` of "hold" (services/job_hold.py; its binary is told "preempt" alike). False if
    it was not running or is already being stopped."""
    grace = timedelta(seconds=settings.GPUSCHED_KILL_GRACE_S if grace_s is None else grace_s)
    with transaction.atomic():
        stopped = Attempt.objects.filter(pk=attempt.pk, status=AttemptStatus.RUNNING,
                                         stop_requested="", ended_at__isnull=True
                                         ).update(stop_requested=stop,
                                                  stop_deadline=timezone.now() + grace)
        if not stopped:
            return False
        try:
            transition(Job.objects.get(pk=attempt.job_id), JobState.PREEMPTING,
                       attempt=attempt, reason=reason, **job_fields)
        except TransitionError:  # it ended or moved meanwhile: ask nothing
            transaction.set_rollback(True)
            return False
    return True


def job_requeue(*, job: Job, by: str) -> Job:
    """Stop `job`'s running attempt at a checkpoint and queue it again."""
    attempt = Attempt.objects.filter(job=job, ended_at__isnull=True).first()
    if job.state != JobState.RUNNING or attempt is None or not attempt_stop_and_requeue(
            attempt, reason=f"requeued by {by}"):
        raise Conflict(f"job {job.pk} is {job.state}: only a running job is requeued",
                       code="not_running")
    return Job.objects.get(pk=job.pk)
