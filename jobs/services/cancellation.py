"""Cancel a job: at once while it waits, through its node while it runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from jobs.models import Attempt, AttemptStatus, Job, Organization
from jobs.scheduler.trigger import request_tick
from jobs.services.errors import Conflict, ValidationFailed
from jobs.services.labels import with_labels
from jobs.services.races import on_fresh_job
from jobs.services.release import release_attempt
from jobs.states import TERMINAL, JobState
from jobs.transitions import LostRace, mark, transition

CANCEL_BATCH = 500  # jobs one bulk cancel ends at most: a request stays short


def end_unstarted(attempt: Attempt) -> None:
    """An attempt its node has not started yet ends here; its late start is then refused."""
    now = timezone.now()
    ended = Attempt.objects.filter(pk=attempt.pk, status=AttemptStatus.SCHEDULED).update(
        status=AttemptStatus.ENDED, ended_at=now, outcome=Attempt.Outcome.CANCELLED)
    if not ended:
        raise LostRace(f"attempt {attempt.pk} started meanwhile")
    release_attempt(attempt.pk, now)


def job_cancel(*, job: Job, reason: str = "cancelled by the client") -> Job:
    """Cancel `job`. Idempotent for a job already cancelled; a finished job is a conflict."""
    # a node may start or end the job while we look
    return on_fresh_job(lambda fresh: _cancel_once(fresh, reason), job)


@dataclass(frozen=True)
class Cancelled:
    cancelled: list[int]  # ended CANCELLED now (or before)
    stopping: list[int]  # running: asked to stop, CANCELLED when their nodes report
    left: int  # jobs that match and were not asked yet: ask again


def jobs_cancel_labelled(*, organization: Organization, labels: list[str]) -> Cancelled:
    """Cancel the organization's jobs that have not ended and carry each of `labels` (as
    `GET /api/v1/jobs?label=` finds them), CANCEL_BATCH at most, oldest first; each job in
    its own transaction, as one cancel would. A job that ends meanwhile is left as it ended."""
    if not labels:
        raise ValidationFailed("name at least one label: a bulk cancel never takes every job",
                               code="invalid_labels", field="label")
    # those asked to stop already go last: a batch of them still stopping never keeps the
    # rest from their cancel, and they are not `left`
    matching = with_labels(Job.objects.filter(organization=organization), labels).exclude(
        state__in=TERMINAL).annotate(stopping=Exists(Attempt.objects.filter(
            job=OuterRef("pk"), ended_at__isnull=True, stop_requested="cancel")))
    cancelled, stopping = [], []
    for job in matching.order_by("stopping", "pk")[:CANCEL_BATCH]:
        try:
            job = job_cancel(job=job, reason="cancelled by the client, by its labels")
        except Conflict:  # it ended meanwhile, or keeps changing: not ours to force
            continue
        (cancelled if job.state == JobState.CANCELLED else stopping).append(job.pk)
    return Cancelled(cancelled, stopping, left=matching.filter(stopping=False).count())


def _cancel_once(job: Job, reason: str) -> Job:
    if job.state == JobState.CANCELLED:
        return job
    if job.state in TERMINAL:
        raise Conflict(f"job {job.pk} already ended {job.state}", code="job_finished")
    with transaction.atomic():
        attempt = Attempt.objects.filter(job=job, ended_at__isnull=True).first()
        if job.state in (JobState.HELD, JobState.QUEUED, JobState.RETRY_WAIT,
                         JobState.SCHEDULED):
            if attempt is not None:
                end_unstarted(attempt)
            transition(job, JobState.CANCELLED, attempt=attempt, reason=reason,
                       finished_at=timezone.now(), error_code="cancelled", error=reason)
            transaction.on_commit(request_tick)
        elif attempt is None:  # its try ended as we read it (a preemption, a lost node)
            raise LostRace(f"job {job.pk} has no live try in {job.state}")
        else:
            _stop_running(job, attempt, reason)
    return job


def _stop_running(job: Job, attempt: Attempt, reason: str) -> None:
    """RUNNING or PREEMPTING: the next heartbeat answers "cancel" and the agent stops the
    binary; the job becomes CANCELLED when the agent reports. Who asked is recorded on the
    job now, and its end puts it in the job's `error` (workers/services/attempts.py). The
    attempt's row is locked before the job's, as its end locks them: the end sees the ask,
    or this finds it ended."""
    locked = Attempt.objects.select_for_update(no_key=True).filter(
        pk=attempt.pk, ended_at__isnull=True).first()
    if locked is None:
        raise LostRace(f"attempt {attempt.pk} ended meanwhile")
    if locked.stop_requested == "cancel":
        return  # asked already: once is enough
    deadline = timezone.now() + timedelta(seconds=settings.GPUSCHED_KILL_GRACE_S)
    Attempt.objects.filter(pk=attempt.pk).update(stop_requested="cancel",
                                                 stop_deadline=deadline)
    mark(job, reason=f"{reason}; stopping on its node", data={"stop": "cancel",
                                                              "reason": reason})
