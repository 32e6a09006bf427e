"""The life of an attempt on its node: start, heartbeat, finish.

Every call carries the attempt's fencing token and changes nothing unless the
database still holds that attempt live with that token (invariant 3): a duplicate
or stale message can neither start the binary, renew, report nor publish.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import DateTimeField, F, FloatField, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from credits.services.holds import meter_attempt
from credits.services.pricing import gpu_hour_price
from jobs.models import Attempt, AttemptRank, AttemptStatus, Job
from jobs.scheduler.trigger import request_tick
from jobs.services.job_hold import settle_stopped_hold
from jobs.services.outputs import output_name
from jobs.services.release import release_attempt, release_gpus
from jobs.services.storable import storable
from jobs.states import JobState
from jobs.transitions import transition
from workers.agent.outcome import EXIT_CHECKPOINTED
from workers.services.checkpoint_cuts import resume_copies, stop_copies_whole
from workers.services.checkpoints import Taken, checkpoint_record, copy_record
from workers.services.retries import settle_failed_try

log = logging.getLogger(__name__)
Outcome = Attempt.Outcome


class StaleAttempt(Exception):
    """The token is not the live attempt's: the caller must stop and report nothing."""


@dataclass(frozen=True)
class AttemptClaim:
    attempt_id: int
    token: int
    job_id: int
    node: str
    gpu_indices: tuple[int, ...]
    gpu_uuids: tuple[str, ...]
    prompt: str
    params: dict
    time_limit_s: int
    node_rank: int = 0  # 0: the attempt's own node; others run a rank of it (ranks.py)
    nodes: tuple[str, ...] = ()  # every node of the gang, in rank order
    rendezvous: tuple[str, int] = ("", 0)  # where a gang spanning nodes meets (rank 0's)
    checkpoint: str = ""  # the stored copy of this node's checkpoint to resume from
    retry: int = 0  # 0 on the job's first try, n on its n-th retry after a failure or loss


@dataclass(frozen=True)
class Verdict:
    action: str  # "continue", "preempt", "cancel" or "stale"
    deadline_s: float = 0.0  # seconds left to stop gracefully, for preempt and cancel
    # the node's time limit for the try now, as `claim_for` gives it: an operator may have
    # lengthened the job's (jobs/services/time_limits.py); None when stale
    time_limit_s: int | None = None


def lease() -> timedelta:
    return timedelta(seconds=settings.GPUSCHED_LEASE_SECONDS)


def attempt_start(*, attempt_id: int, token: int) -> AttemptClaim:
    now = timezone.now()
    with transaction.atomic():
        claimed = Attempt.objects.filter(
            pk=attempt_id, token=token, status=AttemptStatus.SCHEDULED, ended_at__isnull=True
        ).update(status=AttemptStatus.RUNNING, started_at=now, lease_expires_at=now + lease())
        if claimed != 1:
            raise StaleAttempt(f"attempt {attempt_id} token {token} is not startable")
        attempt = Attempt.objects.select_related("job", "node").get(pk=attempt_id)
        job = attempt.job
        _fix_price(attempt)
        transition(job, JobState.RUNNING, attempt=attempt, reason=f"started on {attempt.node}",
                   started_at=job.started_at or now)
    return claim_for(attempt, token, node_rank=0, node_id=attempt.node_id,
                     gpu_indices=attempt.gpu_indices)


def claim_for(attempt: Attempt, token: int, *, node_rank: int, node_id: int,
              gpu_indices: list[int]) -> AttemptClaim:
    """What one node of the attempt needs to run its part. The job's time limit is rank 0's:
    the other ranks, which may start a moment before it, stop a kill grace later unless rank
    0's end stops them first, so a gang times out as rank 0 does."""
    job = attempt.job
    nodes = gang_nodes(attempt)
    limit = node_time_limit(job.time_limit_s, node_rank)
    return AttemptClaim(attempt_id=attempt.pk, token=token, job_id=job.pk,
                        node=nodes[node_rank], gpu_indices=tuple(gpu_indices),
                        gpu_uuids=_bound_uuids(attempt, node_id, gpu_indices),
                        prompt=job.prompt, params=job.params, time_limit_s=limit,
                        node_rank=node_rank, nodes=nodes, rendezvous=rendezvous(attempt),
                        checkpoint=resume_copies(job.pk, len(nodes)).get(node_rank, ""),
                        retry=job.retries)


def node_time_limit(job_limit_s: int, node_rank: int) -> int:
    return job_limit_s + (round(settings.GPUSCHED_KILL_GRACE_S) if node_rank else 0)


def rendezvous(attempt: Attempt) -> tuple[str, int]:
    """Rank 0's node address and a port of its own there: the base port plus its first GPU's
    index, which no other live attempt holds, so two gangs meeting on one node never share
    a port."""
    port = settings.GPUSCHED_RENDEZVOUS_PORT + min(attempt.gpu_indices, default=0)
    return attempt.node.address or attempt.node.name, port


def gang_nodes(attempt: Attempt) -> tuple[str, ...]:
    """The attempt's nodes in rank order: its own, then its ranks'."""
    return (attempt.node.name, *attempt.ranks.values_list("node__name", flat=True))


def _bound_uuids(attempt: Attempt, node_id: int, indices: list[int]) -> tuple[str, ...]:
    """The UUIDs of the attempt's GPUs bound on one node, in the order of `indices`."""
    by_index = dict(attempt.bindings.filter(gpu__node_id=node_id).values_list(
        "gpu__index", "gpu__uuid"))
    return tuple(by_index.get(i, "") for i in indices)


def _fix_price(attempt: Attempt) -> None:
    """An attempt costs what its GPUs cost when it starts, on every node it spans; later
    price changes do not reach it."""
    rate = sum(gpu_hour_price(gpu_type) * len(gpus) for gpu_type, gpus in (
        (attempt.node.gpu_type, attempt.gpu_indices),
        *attempt.ranks.values_list("node__gpu_type", "gpu_indices")))
    if rate:
        Attempt.objects.filter(pk=attempt.pk).update(credits_per_hour=rate)


def attempt_heartbeat(*, attempt_id: int, token: int, progress: float | None = None,
                      checkpointed: bool = False, copied: Taken | None = None) -> Verdict:
    """Renew the lease; answer whether the attempt should go on. A checkpoint posts the
    credits of the work it keeps (credits/services/holds.py): `checkpointed` now, or, for
    `copied`, a copy in storage of the checkpoint taken while the binary ran, recorded for a
    resume, up to the moment the copy keeps the work from (checkpoints.copy_record)."""
    now = timezone.now()
    fields = {"lease_expires_at": now + lease()}
    if progress is not None:
        fields.update(_progress_fields(max(0.0, min(1.0, progress)), now))
    live = Attempt.objects.filter(pk=attempt_id, token=token, status=AttemptStatus.RUNNING,
                                  ended_at__isnull=True)
    with transaction.atomic():
        if live.update(**fields) != 1:  # which also locks the attempt's row
            return Verdict("stale")
        if copied:
            copy_kept(attempt_id, 0, copied)
        elif checkpointed:
            _work_kept(attempt_id, now)
    return verdict_of(attempt_id, now)


def _progress_fields(fraction: float, now: datetime) -> dict:
    """The report, and the try's first one kept as it was (jobs/services/progress.py)."""
    return {"progress": fraction, "progress_at": now,
            "progress_first": Coalesce(F("progress_first"), Value(fraction,
                                                                  output_field=FloatField())),
            "progress_first_at": Coalesce(F("progress_first_at"),
                                          Value(now, output_field=DateTimeField()))}


def copy_kept(attempt_id: int, rank: int, copy: Taken) -> bool:
    """Record a copy made while the attempt runs (its live token checked by the caller, in
    the same transaction); the work it keeps, once kept, is billed. False for an attempt
    that ended meanwhile: a gang's node checks its own row, not the attempt's, which an end
    may lock and commit before this waits on it, and an ended try bills no more."""
    job_id = Attempt.objects.select_for_update(no_key=True).filter(
        pk=attempt_id, ended_at__isnull=True).values_list(
        "job_id", flat=True).first()  # a gang's nodes record one at a time
    if job_id is None:
        return False
    kept_at = copy_record(job_id=job_id, attempt_id=attempt_id, rank=rank, copy=copy)
    if kept_at is not None:
        _work_kept(attempt_id, kept_at)
    return True


def _work_kept(attempt_id: int, at: datetime) -> None:
    """The attempt's work up to `at` is in a checkpoint a retry resumes from: a preemption
    or a loss from now on bills up to there, and its credits are posted."""
    Attempt.objects.filter(pk=attempt_id).filter(  # never back: a copy may finish late
        Q(last_checkpoint_at__isnull=True) | Q(last_checkpoint_at__lt=at)).update(
        last_checkpoint_at=at)
    meter_attempt(attempt_id, until=at, every_s=settings.GPUSCHED_METER_INTERVAL_S)


def verdict_of(attempt_id: int, now: datetime, node_rank: int = 0) -> Verdict:
    """Whether the attempt, live, should go on, or stop and by when (all its nodes alike),
    and the time limit of the attempt's node `node_rank` now."""
    row = Attempt.objects.filter(pk=attempt_id).values_list(
        "stop_requested", "stop_deadline", "job__time_limit_s").first()
    if row is None:
        return Verdict("stale")
    stop, deadline, job_limit = row
    limit = node_time_limit(job_limit, node_rank)
    if not stop:
        return Verdict("continue", time_limit_s=limit)
    left = (deadline - now).total_seconds() if deadline else settings.GPUSCHED_KILL_GRACE_S
    # a hold stops the binary as a preemption does: at a checkpoint, to resume
    return Verdict("preempt" if stop == "hold" else stop, max(0.0, left), limit)


def attempt_free_gpus(*, attempt_id: int, token: int) -> bool:
    """Free the GPUs of the attempt's own node (rank 0) once its binary has ended, ahead of
    its report, so that its preemptor need not wait while it copies its checkpoint; a gang's
    other nodes free theirs with ranks.rank_free_gpus. The snapshot leaves the attempt out
    from then on. True if freed; a stale token frees nothing."""
    now = timezone.now()
    with transaction.atomic():
        freed = Attempt.objects.filter(
            pk=attempt_id, token=token, status=AttemptStatus.RUNNING, ended_at__isnull=True,
            gpus_freed_at__isnull=True).update(gpus_freed_at=now)
        if freed != 1:
            return False
        node_id = Attempt.objects.filter(pk=attempt_id).values_list("node_id", flat=True).get()
        release_gpus(attempt_id, now, node_id=node_id)
        transaction.on_commit(request_tick)  # a preemptor may start on them now
    return True


@dataclass(frozen=True)
class AttemptResult:
    outcome: str  # an Attempt.Outcome
    exit_code: int | None
    stderr_tail: str = ""
    output_path: Path | None = None
    error_code: str = ""
    checkpoint: str = ""  # the stored copy of the node's checkpoint, if it stopped to resume
    checkpoint_step: int | None = None  # the step the binary announced it with, if any
    rank: int = 0  # the node of the gang whose report this is (a failing rank's ends it)


_JOB_STATE_FOR = {
    Outcome.SUCCEEDED: JobState.SUCCEEDED,
    Outcome.FAILED: JobState.FAILED,
    Outcome.OOM: JobState.FAILED,
    Outcome.TIMED_OUT: JobState.TIMED_OUT,
    Outcome.CANCELLED: JobState.CANCELLED,
    Outcome.PREEMPTED: JobState.QUEUED,
}


# ends that bill the attempt's whole run; the others bill what it had checkpointed
_BILLED_TO_THE_END = frozenset({Outcome.SUCCEEDED, Outcome.TIMED_OUT, Outcome.CANCELLED})


def _end_attempt(attempt_id: int, token: int, result: AttemptResult) -> Attempt:
    now = timezone.now()
    fields = {}
    if (result.outcome == Outcome.PREEMPTED and result.exit_code == EXIT_CHECKPOINTED
            and stop_copies_whole(attempt_id, result.checkpoint, result.checkpoint_step)):
        # it wrote one as it stopped, which its next nodes will have: nothing was lost up to
        # its end, or up to when it freed its GPUs to copy that checkpoint (the copy is not
        # GPU time); else what its copies made while it ran kept
        fields["last_checkpoint_at"] = Coalesce("gpus_freed_at", Value(now))
    ended = Attempt.objects.filter(pk=attempt_id, token=token, ended_at__isnull=True).update(
        status=AttemptStatus.ENDED, ended_at=now, outcome=result.outcome,
        exit_code=result.exit_code, stderr_tail=storable(result.stderr_tail[-4000:]), **fields)
    if ended != 1:
        raise StaleAttempt(f"attempt {attempt_id} token {token} already ended")
    release_attempt(attempt_id, now)
    return Attempt.objects.select_related("job").get(pk=attempt_id)


def _job_fields(job: Job, attempt: Attempt, result: AttemptResult) -> dict:
    now = timezone.now()
    if result.outcome == Outcome.PREEMPTED:
        # a stop for a hold is not a preemption: the per-job cap counts the policy's own
        preempted = attempt.stop_requested == "preempt"
        fields = {"preemptions": job.preemptions + preempted}
        if job.hold:  # held as it ran: HELD now, by the hold's reason
            return {**fields, "pending_code": "hold", "pending_reason": job.pending_reason}
        return {**fields, "enqueued_at": now, "pending_code": "new",
                "pending_reason": "resuming after preemption" if preempted
                else "queued again after it stopped"}
    fields = {"finished_at": now}
    if result.outcome == Outcome.SUCCEEDED and result.output_path:
        name = output_name(job.pk, result.output_path.name)
        with result.output_path.open("rb") as fh:
            fields["output"] = default_storage.save(name, File(fh))
        fields["result"] = {"output": fields["output"],
                            "size": result.output_path.stat().st_size}
    elif result.outcome != Outcome.SUCCEEDED:
        fields["error_code"] = result.error_code or result.outcome.lower()
        fields["error"] = storable(result.stderr_tail[-2000:])  # a binary prints anything
        if result.outcome == Outcome.CANCELLED:  # who asked first, as for a waiting job
            fields["error"] = "\n".join(filter(None, [_cancelled_by(job), fields["error"]]))
    return fields


def _cancelled_by(job: Job) -> str:
    """Who asked for the running job's cancel, as its history recorded it when asked
    (jobs/services/cancellation.py); "" for a stop no one asked of it."""
    asked = job.events.filter(data__stop="cancel").order_by("-pk").values_list(
        "data", flat=True).first()
    return (asked or {}).get("reason", "")


def report_recorded(*, attempt_id: int, token: int, rank: int, outcome: str,
                    exit_code: int | None) -> bool:
    """Whether this try (or its rank) already ended as this report says: a node that sent
    its report again, its first answer lost after the commit, learns it was recorded."""
    ended = {"ended_at__isnull": False, "outcome": outcome, "exit_code": exit_code}
    if rank:
        return AttemptRank.objects.filter(attempt_id=attempt_id, attempt__token=token,
                                          rank=rank, **ended).exists()
    return Attempt.objects.filter(pk=attempt_id, token=token, **ended).exists()


def attempt_finish(*, attempt_id: int, token: int, result: AttemptResult) -> Job:
    """End the attempt, free its GPUs and settle the job, all or nothing."""
    with transaction.atomic():
        attempt = _end_attempt(attempt_id, token, result)
        job = Job.objects.get(pk=attempt.job_id)
        checkpoint_record(job_id=job.pk, attempt_id=attempt.pk, rank=0, name=result.checkpoint,
                          step=result.checkpoint_step)
        target = _JOB_STATE_FOR[result.outcome]
        if result.outcome == Outcome.PREEMPTED and job.state == JobState.RUNNING:
            target = JobState.FAILED  # exited with "resumable" although nobody asked it to stop
        elif result.outcome == Outcome.PREEMPTED and job.hold:
            target = JobState.HELD
        held = {"by": job.hold, "reason": job.pending_reason} if job.hold else None
        # the output is copied before the ledger is touched: metering and settling lock the
        # fleet's system:usage account until this commits, and a video takes a while to copy
        fields = _job_fields(job, attempt, result)
        # the whole run, or what its last checkpoint kept (a job that ends FAILED is refunded)
        meter_attempt(attempt.pk, until=attempt.ended_at if result.outcome in _BILLED_TO_THE_END
                      else attempt.last_checkpoint_at)
        # a failure another try may not repeat: the job waits for it (or is dead-lettered)
        retried = result.outcome in (Outcome.FAILED, Outcome.OOM) and settle_failed_try(
            job, attempt, outcome=result.outcome, error_code=fields["error_code"],
            exit_code=result.exit_code, error=fields["error"], rank=result.rank)
        if not retried:
            transition(job, target, attempt=attempt, reason=f"attempt {result.outcome.lower()}"
                       f", exit {result.exit_code}", **fields)
        if held:
            settle_stopped_hold(job, **held)
        transaction.on_commit(request_tick)
    return job
