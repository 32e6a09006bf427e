"""Attempts whose lease ran out are LOST; their GPUs are freed and the job waits to retry,
backing off, or is dead-lettered once its retries are spent (retries.py). A job whose client
asked to cancel it while it ran is CANCELLED instead: the cancel must not be lost with
its node.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from credits.services.holds import meter_attempt
from jobs.models import Attempt, AttemptRank, AttemptStatus, Job
from jobs.services.job_hold import settle_stopped_hold
from jobs.services.release import release_attempt
from jobs.states import LIVE, JobState
from jobs.transitions import TransitionError, transition
from workers.services.retries import retry_or_dead_letter, retry_unstarted

log = logging.getLogger(__name__)


def _settle_lost(job: Job, attempt: Attempt, now: datetime) -> None:
    if attempt.stop_requested == "cancel":
        transition(job, JobState.CANCELLED, attempt=attempt, finished_at=now,
                   reason="cancelled; its node stopped answering", error_code="cancelled")
        return
    held = {"by": job.hold, "reason": job.pending_reason} if job.hold else None
    transition(job, JobState.LOST, attempt=attempt, reason="lease expired")
    if attempt.started_at is None:  # its node never took it: no try of the binary was spent
        retry_unstarted(job, attempt, now)
    else:
        retry_or_dead_letter(job, attempt, now, why="its node stopped answering (lease "
                             "expired)")
    if held:  # held as it stopped: it waits HELD for its release, not for its retry
        settle_stopped_hold(job, **held)


def _reap_one(attempt_id: int, now: datetime) -> bool:
    with transaction.atomic():
        # Conditional on a lease still being expired: a heartbeat that renewed it wins.
        ended = Attempt.objects.filter(_expired(now), pk=attempt_id, ended_at__isnull=True
                                       ).update(
            status=AttemptStatus.ENDED, ended_at=now, outcome=Attempt.Outcome.LOST)
        if not ended:
            return False
        release_attempt(attempt_id, now)
        attempt = Attempt.objects.get(pk=attempt_id)
        meter_attempt(attempt_id, until=attempt.last_checkpoint_at)  # the work it kept
        job = Job.objects.get(pk=attempt.job_id)
        if job.state in LIVE:
            _settle_lost(job, attempt, now)
    return True


def _expired(now: datetime) -> Q:
    """Its lease ran out, or that of one of its ranks: a gang missing a node cannot go on."""
    return Q(lease_expires_at__lt=now) | Exists(AttemptRank.objects.filter(
        attempt=OuterRef("pk"), ended_at__isnull=True, lease_expires_at__lt=now))


def reap_expired_attempts(*, now: datetime) -> int:
    expired = {*Attempt.objects.filter(ended_at__isnull=True, lease_expires_at__lt=now
                                       ).values_list("pk", flat=True),
               *AttemptRank.objects.filter(ended_at__isnull=True, lease_expires_at__lt=now
                                           ).values_list("attempt_id", flat=True)}
    reaped = 0
    for attempt_id in sorted(expired):
        try:
            reaped += _reap_one(attempt_id, now)
        except TransitionError as exc:
            log.warning("reaping attempt %s: %s", attempt_id, exc)
    return reaped


def release_due_retries(*, now: datetime) -> int:
    """RETRY_WAIT jobs whose backoff is over wait in the queue again."""
    released = 0
    for job in Job.objects.filter(state=JobState.RETRY_WAIT, retry_at__lte=now):
        try:
            transition(job, JobState.QUEUED, reason="retrying", enqueued_at=now,
                       pending_code="new",
                       pending_reason=f"waiting again after a lost or failed attempt "
                                      f"(retry {job.retries})")
            released += 1
        except TransitionError as exc:
            log.warning("releasing job %s: %s", job.pk, exc)
    return released
