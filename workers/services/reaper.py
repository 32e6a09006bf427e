"""Attempts whose lease ran out are LOST; their GPUs are freed and the job waits again."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from jobs.models import Attempt, AttemptStatus, GpuBinding, Job
from jobs.states import JobState
from jobs.transitions import TransitionError, transition

log = logging.getLogger(__name__)


def _reap_one(attempt_id: int, now: datetime) -> bool:
    with transaction.atomic():
        # Conditional on the lease still being expired: a heartbeat that renewed it wins.
        ended = Attempt.objects.filter(pk=attempt_id, ended_at__isnull=True,
                                       lease_expires_at__lt=now).update(
            status=AttemptStatus.ENDED, ended_at=now, outcome=Attempt.Outcome.LOST)
        if not ended:
            return False
        GpuBinding.objects.filter(attempt_id=attempt_id, released_at__isnull=True).update(
            released_at=now)
        attempt = Attempt.objects.get(pk=attempt_id)
        job = Job.objects.get(pk=attempt.job_id)
        if job.state in (JobState.SCHEDULED, JobState.RUNNING, JobState.PREEMPTING):
            transition(job, JobState.LOST, attempt=attempt, reason="lease expired")
            transition(job, JobState.RETRY_WAIT, attempt=attempt, reason="will retry")
            transition(job, JobState.QUEUED, attempt=attempt, reason="re-queued after loss",
                       enqueued_at=now, pending_code="new",
                       pending_reason="re-queued after its node stopped answering")
    return True


def reap_expired_attempts(*, now: datetime) -> int:
    expired = Attempt.objects.filter(ended_at__isnull=True, lease_expires_at__lt=now
                                     ).values_list("pk", flat=True)
    reaped = 0
    for attempt_id in list(expired):
        try:
            reaped += _reap_one(attempt_id, now)
        except TransitionError as exc:
            log.warning("reaping attempt %s: %s", attempt_id, exc)
    return reaped
