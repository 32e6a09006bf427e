"""A job may run after other jobs of its organization (`after`): a pipeline's next step (an
upscale after the video it upscales) is submitted with the rest and waits for them.

Such a job is HELD, out of the scheduler's queue, until every job it runs after SUCCEEDED;
then it is QUEUED, its wait (which ages its rank) counted from then, as Slurm counts a job's
age from when it became eligible. Once one of them ends otherwise (failed, timed out,
cancelled, dead-lettered) it is CANCELLED `dependency_failed`, and so are the jobs held
after it. With `after_mode` "ended" (Slurm's afterany) it waits only for them to end,
however they end, and is never cancelled by them: the step that stitches a batch's clips
runs with those that rendered. One that someone also holds (services/job_hold.py) stays
HELD for their release. A submission locks the jobs it names, so that one ending meanwhile
either sees the new job among those held after it, or is seen ended by the submission: none
is left held after a job that already ended.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from jobs.models import Job, Organization
from jobs.scheduler.trigger import request_tick
from jobs.services.errors import Conflict, ValidationFailed
from jobs.states import TERMINAL, JobState

MAX_AFTER = 16  # jobs one job may run after
SUCCEEDED, ENDED = "succeeded", "ended"  # after_mode: what they must do first
AFTER_MODES = (SUCCEEDED, ENDED)


def _done(state: str, mode: str) -> bool:
    return state == JobState.SUCCEEDED if mode == SUCCEEDED else state in TERMINAL


def dependencies_of(org: Organization, ids: tuple[int, ...],
                    mode: str = SUCCEEDED) -> tuple[list[Job], list[int]]:
    """The jobs `ids` name, locked for the caller's transaction, and those of them still to
    succeed (or, `mode` "ended", to end). A job of another organization, or none, is a 400;
    one that ended other than SUCCEEDED, where it must succeed, a 409 (the new job could
    never run)."""
    if mode not in AFTER_MODES:
        raise ValidationFailed(f"after_mode is one of {', '.join(AFTER_MODES)}",
                               code="invalid_after_mode", field="after_mode")
    if len(ids) > MAX_AFTER:
        raise ValidationFailed(f"after names at most {MAX_AFTER} jobs",
                               code="too_many_dependencies", field="after")
    wanted = set(ids)
    jobs = list(Job.objects.select_for_update(no_key=True).filter(
        organization=org, pk__in=wanted).order_by("pk"))
    missing = wanted - {job.pk for job in jobs}
    if missing:
        raise ValidationFailed(f"no job {min(missing)} in this organization",
                               code="unknown_dependency", field="after")
    for job in jobs:
        if mode == SUCCEEDED and job.state in TERMINAL and job.state != JobState.SUCCEEDED:
            raise Conflict(f"job {job.pk} ended {job.state}: a job after it could never run",
                           code="dependency_failed")
    return jobs, [job.pk for job in jobs if not _done(job.state, mode)]


def still_waiting(job: Job) -> list[int]:
    """The jobs `job` runs after that have still to succeed (or to end, by its mode)."""
    return [pk for pk, state in job.after.values_list("pk", "state")
            if not _done(state, job.after_mode)]


def held_reason(waiting: list[int], mode: str = SUCCEEDED) -> str:
    names = ", ".join(str(pk) for pk in sorted(waiting))
    return (f"waiting for job{'s' if len(waiting) > 1 else ''} {names} to "
            f"{'succeed' if mode == SUCCEEDED else 'end'}")


def lock_before_ledger(job_id: int, *, own_row: bool = True) -> None:
    """Lock the job's row (unless its caller's update did) and those of the jobs held after
    it, and after them, to the end of the chain, before any ledger row: its end releases
    them once it settled its credits (a failure cancels the whole chain), while each of them
    may settle its own (a cancel, a hold, a release, a shorter limit: their row, then the
    ledger's). Taken in that order by both, neither waits on a lock the other holds while
    it waits for one of the other's (docs/credits.md, "Lock order")."""
    if own_row:
        Job.objects.select_for_update(no_key=True).filter(pk=job_id).values_list("pk").first()
    seen, frontier = {job_id}, [job_id]
    while frontier:
        found = Job.objects.select_for_update(no_key=True, of=("self",)).filter(
            after__pk__in=frontier, state=JobState.HELD).order_by("pk").values_list(
            "pk", flat=True)
        frontier = [pk for pk in dict.fromkeys(found) if pk not in seen]
        seen.update(frontier)


def release_dependents(job: Job) -> None:
    """`job` has just ended (inside its transition's transaction): queue the jobs held after
    it that wait for nothing more, or cancel those that needed it to succeed if it did not."""
    from jobs.transitions import transition  # transitions calls this module

    now = timezone.now()
    for held in job.dependents.select_for_update(no_key=True).filter(state=JobState.HELD):
        if job.state != JobState.SUCCEEDED and held.after_mode == SUCCEEDED:
            transition(held, JobState.CANCELLED, reason=f"job {job.pk} ended {job.state}",
                       finished_at=now, error_code="dependency_failed",
                       error=f"job {job.pk}, which it runs after, ended {job.state}")
            continue
        if held.hold:  # someone holds it too: their release queues it (services/job_hold.py)
            continue
        waiting = still_waiting(held)
        if waiting:
            Job.objects.filter(pk=held.pk).update(
                pending_reason=held_reason(waiting, held.after_mode))
            continue
        transition(held, JobState.QUEUED, reason=f"job {job.pk} {job.state.lower()}, the last "
                   f"it waited for", enqueued_at=now, pending_code="new",
                   pending_reason="waiting for the next scheduling round")
        transaction.on_commit(request_tick)
