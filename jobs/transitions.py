"""The one place that changes a job's state.

Each move is a compare-and-set on (id, state, version): a caller that read a stale job
loses the race and is told so, instead of overwriting someone else's move.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.models import Attempt, Job, JobEvent
from jobs.states import TERMINAL, JobState, is_allowed

log = logging.getLogger(__name__)


class TransitionError(Exception):
    code = "transition_error"


class IllegalTransition(TransitionError):
    code = "illegal_transition"


class LostRace(TransitionError):
    code = "lost_race"


def transition(
    job: Job,
    to: JobState,
    *,
    reason: str = "",
    attempt: Attempt | None = None,
    data: dict | None = None,
    **fields,
) -> Job:
    """Move `job` from the state and version it holds to `to`; write its JobEvent.

    `fields` are other Job columns written in the same update. On success the instance
    is brought up to date; on a lost race it is left as it was. A move anywhere but HELD
    ends a hold: a cancel ends a held job too, and a job held while it stopped that ends
    otherwise (it finished in its grace, failed, was cancelled) is no one's to hold.
    """
    if not is_allowed(job.state, to):
        raise IllegalTransition(f"job {job.pk}: {job.state} → {to} is not allowed")
    if job.hold and to != JobState.HELD:
        fields["hold"] = ""
    if to in TERMINAL:  # every end has a time: retention and reports count from it
        fields.setdefault("finished_at", timezone.now())
    with transaction.atomic():
        _compare_and_set(job, to, reason, attempt, data or {}, fields)
        from jobs.services.webhooks import notify_job_moved

        if to in TERMINAL:  # its credits are settled in the end's transaction
            from credits.services.holds import settle_job
            from jobs.services.dependencies import lock_before_ledger, release_dependents
            from jobs.services.output_strays import strays_delete_once_ended

            lock_before_ledger(job.pk, own_row=False)  # its row: the update above
            settle_job(job)
            release_dependents(job)  # and the jobs held after it queue, or are cancelled
            strays_delete_once_ended(job)
        notify_job_moved(job)  # and the notices owed for the move, in the move's
    return job


# What a waiting job's request may change (services/amend.py); nothing else is amended
AMENDABLE = frozenset({"gpus", "min_gpus", "gpu_types", "min_gpu_memory_mb", "region",
                       "time_limit_s", "urgency_s"})


def amend(job: Job, *, reason: str, data: dict, **fields) -> Job:
    """Change a QUEUED job's request in place: the same compare-and-set as a move and a
    JobEvent from QUEUED to QUEUED, so that a scheduler round that read the job before sees
    another version and places nothing by the old request. Its pending reason, estimated
    start and any GPUs promised to it are dropped: they were worked out for the old one."""
    if job.state != JobState.QUEUED or not fields or not fields.keys() <= AMENDABLE:
        raise IllegalTransition(f"job {job.pk}: cannot amend {sorted(fields)} in {job.state}")
    fields.update(pending_code="new", pending_reason="changed; waiting for the next round",
                  pending_what_if="", estimated_start=None, nominated_node=None,
                  nominated_gpus=[], nominated_peers=[])
    with transaction.atomic():
        _compare_and_set(job, JobState(job.state), reason, None, data, fields)
    return job


def retime(job: Job, *, time_limit_s: int, reason: str, data: dict) -> Job:
    """Change the time limit of a job that started and has not ended, in place: the same
    compare-and-set and an event from its state to itself (services/time_limits.py)."""
    if job.state in TERMINAL:
        raise IllegalTransition(f"job {job.pk}: cannot change its time limit in {job.state}")
    with transaction.atomic():
        _compare_and_set(job, JobState(job.state), reason, None, data,
                         {"time_limit_s": time_limit_s})
    return job


def mark(job: Job, *, reason: str, data: dict) -> Job:
    """Record what was asked of a job that does not move it, e.g. a cancel its node carries
    out later (services/cancellation.py): the same compare-and-set and an event from its
    state to itself, nothing else changed."""
    if job.state in TERMINAL:
        raise IllegalTransition(f"job {job.pk}: nothing to record in {job.state}")
    with transaction.atomic():
        _compare_and_set(job, JobState(job.state), reason, None, data, {})
    return job


def rehold(job: Job, *, reason: str, data: dict, hold: str, pending_reason: str) -> Job:
    """Change who holds a HELD job (`hold`, "" for none: it waits for the jobs it runs after
    alone), or a PREEMPTING one (it goes HELD, or QUEUED without one, once it stopped),
    without moving it: the same compare-and-set and an event from the state to itself."""
    if job.state not in (JobState.HELD, JobState.PREEMPTING):
        raise IllegalTransition(f"job {job.pk}: cannot change its hold in {job.state}")
    pending_code = "hold" if hold else "dependency" if job.state == JobState.HELD else "new"
    with transaction.atomic():
        _compare_and_set(job, JobState(job.state), reason, None, data, {
            "hold": hold, "pending_code": pending_code, "pending_reason": pending_reason})
    return job


def _compare_and_set(job: Job, to: JobState, reason: str, attempt: Attempt | None,
                     data: dict, fields: dict) -> None:
    """Write `to` and `fields` if the row still holds the job's state and version, with the
    event of the new version; bring the instance up to date. Inside the caller's atomic."""
    src, now = job.state, timezone.now()
    updated = Job.objects.filter(pk=job.pk, state=src, version=job.version).update(
        state=to, version=F("version") + 1, updated_at=now, **fields)
    if updated != 1:
        raise LostRace(f"job {job.pk} moved on from {src} v{job.version}")
    JobEvent.objects.create(job_id=job.pk, from_state=src, to_state=to,
                            version=job.version + 1, reason=reason[:200], attempt=attempt,
                            data=data)
    _log_once_committed(job, src, to, reason, attempt)
    job.state, job.version, job.updated_at = to, job.version + 1, now
    for name, value in fields.items():
        setattr(job, name, value)


def _log_once_committed(job: Job, src: str, to: str, reason: str,
                        attempt: Attempt | None) -> None:
    """One structured line per move, written only if the move commits."""
    fields = {"job_id": job.pk, "organization_id": job.organization_id, "from_state": src,
              "to_state": str(to), "attempt_id": attempt.pk if attempt else None}
    transaction.on_commit(lambda: log.info("job %s: %s → %s (%s)", job.pk, src, to, reason,
                                           extra=fields))


def record_creation(job: Job, reason: str = "submitted") -> None:
    """The first event of a job: it appears in QUEUED at version 0."""
    JobEvent.objects.create(job_id=job.pk, from_state="", to_state=job.state,
                            version=job.version, reason=reason)
