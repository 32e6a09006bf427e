"""Hold a job out of the queue, and release it, as Slurm's `scontrol hold` / `release` do:
a client pauses work it may still want (a batch whose inputs turned out wrong, a retry it
wants to look at first, a training run whose GPUs and credits it wants back for a while),
an operator stops a job without ending it. A job placed whose node has not started it yet
gives its GPUs back at once, as a cancel does; a running job that checkpoints is first
stopped at a checkpoint, as a preemption stops it, and resumes from there once released.

A held job is HELD: the scheduler never sees it, a start deadline still ends it, and it
reserves no credits: what its hold on them kept goes back to the organization's wallets (what
it spent stays spent), and its release holds what it may still cost again, refused (402, the
job stays held) as a submission is when the credits or a budget no longer cover it. Released,
it queues again with its wait counted from then (a hold is not a way to bank age, as Slurm
counts a job's age from when it became eligible), unless jobs it runs after have still to
succeed: then it waits for them, as before the hold. A job held behind such jobs is not
queued when the last of them succeeds; one of them failing still cancels it (it could never
run). An operator's hold is not the client's to release; an operator releases any. Every
change is a compare-and-set on the job's version, so a scheduler round that read the job
before its hold places nothing by that read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from credits.errors import BudgetExceeded, InsufficientCredits
from credits.services.holds import free_held_job, hold_released_job
from jobs.models import Attempt, Job, Organization
from jobs.scheduler.trigger import request_tick
from jobs.services.cancellation import CANCEL_BATCH, end_unstarted
from jobs.services.dependencies import held_reason, still_waiting
from jobs.services.errors import Conflict, Forbidden, ServiceError, ValidationFailed
from jobs.services.labels import with_labels
from jobs.services.races import on_fresh_job
from jobs.services.requeue import attempt_stop_and_requeue
from jobs.services.submission import locked_organization
from jobs.states import LIVE, TERMINAL, JobState
from jobs.transitions import LostRace, rehold, transition

CLIENT, OPERATOR = "client", "operator"
# held at once: a SCHEDULED job's node has not started it, so it loses nothing
HOLDABLE = (JobState.QUEUED, JobState.RETRY_WAIT, JobState.HELD, JobState.SCHEDULED)
STOPPABLE = (JobState.RUNNING, JobState.PREEMPTING)  # held once stopped at a checkpoint
_RANK = {"": 0, CLIENT: 1, OPERATOR: 2}  # an operator's hold outranks the client's


def holdable(job: Job) -> bool:
    """Whether a hold would take the job now: it waits, or it runs and checkpoints."""
    return not job.hold and (job.state in HOLDABLE or job.checkpointable
                             and job.state in STOPPABLE)


def _reason(by: str, note: str) -> str:
    said = f": {note}" if note else ""
    if by == OPERATOR:
        return f"held by an operator{said}"
    return f"held by the client{said}; release it to queue it again"


def job_hold(*, job: Job, by: str = CLIENT, note: str = "") -> Job:
    """Hold `job` for `by`: a waiting one (QUEUED, RETRY_WAIT or already HELD) or one its
    node has not started (SCHEDULED) at once, a running one that checkpoints once it
    stopped at a checkpoint (`_hold_running`). Holding a job held already keeps the
    stronger hold; one that ended is a conflict."""
    def hold(job: Job) -> Job:
        if job.state in TERMINAL:
            raise Conflict(f"job {job.pk} already ended {job.state}", code="job_finished")
        if _RANK[job.hold] >= _RANK[by]:
            return job
        reason = _reason(by, note)
        if job.state in STOPPABLE:
            return _hold_running(job, by, reason)
        with transaction.atomic():
            if job.state == JobState.HELD:
                rehold(job, reason=f"held by {by}", data={"hold": by}, hold=by,
                       pending_reason=reason)
            else:
                attempt = _unstarted_attempt(job)
                transition(job, JobState.HELD, attempt=attempt, reason=f"held by {by}",
                           data={"hold": by}, hold=by, pending_code="hold",
                           pending_reason=reason, pending_what_if="", estimated_start=None,
                           retry_at=None, nominated_node=None, nominated_gpus=[],
                           nominated_peers=[])
            free_held_job(job)  # after the move: a job that lost its race keeps its credits
        return job
    return on_fresh_job(hold, job)


def _hold_running(job: Job, by: str, reason: str) -> Job:
    """Stop a running job at a checkpoint, as a preemption does, and hold it: it is
    PREEMPTING, its `hold` set, until its attempt reports, then HELD (`settle_stopped_hold`).
    Kueue suspends a workload so; Slurm's `scontrol requeuehold` does it for any job. A job
    that cannot resume would start over when released: holding it is refused, as for one
    being cancelled."""
    if not job.checkpointable:
        raise Conflict(f"job {job.pk} does not checkpoint: stopped, it would start over; "
                       f"cancel it, or let it run", code="not_checkpointable")
    with transaction.atomic():
        attempt = _live_attempt(job)
        if attempt.stop_requested == "cancel":
            raise Conflict(f"job {job.pk} is being cancelled", code="job_cancelling")
        if job.state == JobState.PREEMPTING:  # stopping already: it goes HELD, not QUEUED
            return rehold(job, reason=f"held by {by}", data={"hold": by}, hold=by,
                          pending_reason=reason)
    if not attempt_stop_and_requeue(attempt, reason=f"held by {by}", stop="hold", hold=by,
                                    pending_code="hold", pending_reason=reason):
        raise LostRace(f"job {job.pk} moved on from {job.state}")
    return Job.objects.get(pk=job.pk)


def _unstarted_attempt(job: Job) -> Attempt | None:
    """A SCHEDULED job's attempt, ended before its node starts it (its late start is
    refused, as after a cancel) and its GPUs freed; LostRace if the node started it first.
    None for a job with no attempt live."""
    attempt = Attempt.objects.filter(job=job, ended_at__isnull=True).first()
    if job.state != JobState.SCHEDULED or attempt is None:
        return attempt
    end_unstarted(attempt)
    return attempt


def _live_attempt(job: Job) -> Attempt:
    """The job's live attempt, locked as its end locks it before it reads the job: a hold
    that changes the job is seen by that end, or finds it ended and tries again."""
    attempt = Attempt.objects.select_for_update(no_key=True).filter(
        job=job, ended_at__isnull=True).first()
    if attempt is None:
        raise LostRace(f"job {job.pk}'s attempt ended")
    return attempt


def settle_stopped_hold(job: Job, *, by: str, reason: str) -> None:
    """A job held as it ran has stopped, and its attempt's end moved it: HELD now, or
    waiting to retry after a failure as it stopped, which the hold keeps out of the queue
    too; either way its credits go back until its release. Called in the end's
    transaction; a job that ended is left as it is."""
    if job.state == JobState.RETRY_WAIT:
        transition(job, JobState.HELD, reason=f"held by {by}", data={"hold": by}, hold=by,
                   pending_code="hold", pending_reason=reason, retry_at=None)
    if job.state == JobState.HELD:
        free_held_job(job)


def job_release(*, job: Job, by: str = CLIENT) -> Job:
    """Release `job`'s hold: it queues again, its wait counted from now (a retry's backoff
    is over too), or waits HELD for the jobs it runs after that have still to succeed."""
    def release(job: Job) -> Job:
        if not job.hold:
            raise Conflict(f"job {job.pk} is not held", code="job_not_held")
        if _RANK[job.hold] > _RANK[by]:
            raise Forbidden(f"an operator holds job {job.pk}; only an operator releases it",
                            code="held_by_operator")
        if job.state == JobState.PREEMPTING:  # still stopping: it queues once it stopped
            with transaction.atomic():
                _live_attempt(job)
                return rehold(job, reason=f"released by {by}", data={"hold": ""}, hold="",
                              pending_reason="stopping; it queues again once it stopped")
        with transaction.atomic():
            locked_organization(job.organization)  # its credits' lock order: as a submission
            # locked first: a job it runs after that succeeds meanwhile either sees the hold
            # and leaves it HELD, or is seen succeeded here, so none is left HELD for nothing
            locked = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
            if locked.version != job.version:
                raise LostRace(f"job {job.pk} moved on from v{job.version}")
            waiting = still_waiting(job)
            if waiting:
                rehold(job, reason=f"released by {by}", data={"hold": ""}, hold="",
                       pending_reason=held_reason(waiting, job.after_mode))
            else:
                transition(job, JobState.QUEUED, reason=f"released by {by}", data={"hold": ""},
                           enqueued_at=timezone.now(), pending_code="new",
                           pending_reason="waiting for the next scheduling round")
                transaction.on_commit(request_tick)
            _hold_credits_again(job)
        return job
    return on_fresh_job(release, job)


def _hold_credits_again(job: Job) -> None:
    """The credits a released job may still cost, held again; a refusal names the job (an
    operator releases many at once) and rolls the release back."""
    try:
        hold_released_job(job)
    except (InsufficientCredits, BudgetExceeded) as exc:
        exc.message = f"job {job.pk} stays held: {exc.message}"
        exc.args = (exc.message,)
        raise


@dataclass(frozen=True)
class Batch:
    done: list[int]  # held (or released) now
    left: int  # jobs that match beyond this batch: ask again
    # the release that stopped the batch: the credits or a budget no longer cover its job
    refused: ServiceError | None = None
    stopping: list[int] = field(default_factory=list)  # held once they stopped running


def jobs_hold_labelled(*, organization: Organization, labels: list[str],
                       release: bool = False) -> Batch:
    """Hold the organization's jobs that carry each of `labels` (or, with `release`, release
    the client's holds on them): a batch whose inputs turned out wrong, an experiment paused.
    CANCEL_BATCH at most, oldest first, each as its own hold would: running jobs that
    checkpoint are `stopping` (held once stopped), those that would start over are left to
    run. Held jobs are left out of a hold, and an operator's holds out of a release; a job
    that starts or ends meanwhile is left as it is. A release the credits no longer cover
    stops the batch (`refused`), the rest still held."""
    if not labels:
        raise ValidationFailed("name at least one label: a bulk hold never takes every job",
                               code="invalid_labels", field="label")
    jobs = with_labels(Job.objects.filter(organization=organization), labels)
    matching = (jobs.filter(hold=CLIENT) if release else jobs.filter(
        Q(state__in=HOLDABLE) | Q(state__in=STOPPABLE, checkpointable=True), hold="")
                ).order_by("pk")
    act = job_release if release else job_hold
    done: list[int] = []
    stopping: list[int] = []
    for job in matching[:CANCEL_BATCH]:
        try:
            job = act(job=job)
        except Conflict:  # it started, ended or was released meanwhile: not ours to force
            continue
        except (InsufficientCredits, BudgetExceeded) as exc:  # the rest would cost more
            return Batch(done, left=matching.count(), refused=exc)
        (stopping if job.state in LIVE and not release else done).append(job.pk)
    return Batch(done, left=matching.count(), stopping=stopping)
