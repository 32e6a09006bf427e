"""Commit the policy's decisions in one transaction; publish node tasks after commit."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction

from jobs import policy as P
from jobs.fencing import next_token
from jobs.models import Attempt, AttemptRank, GpuBinding, Job
from jobs.scheduler.reasons import Held, write_reasons
from jobs.scheduler.snapshot import schedulable
from jobs.states import JobState
from jobs.transitions import TransitionError, transition
from workers.models import Gpu, Node
from workers.services.dedication import begins_at

log = logging.getLogger(__name__)


@dataclass
class ApplyReport:
    placed: int = 0
    refused: int = 0
    preempted: int = 0
    reasons_written: int = 0


@dataclass(frozen=True)
class Seat:
    """One node's share of a gang: the node and the GPUs bound there."""

    node: Node
    gpus: list[Gpu]

    @property
    def indices(self) -> list[int]:
        return sorted(g.index for g in self.gpus)


def place(placement: P.Placement, now: datetime) -> Attempt:
    """Bind the placement's GPUs to a new attempt and move its job to SCHEDULED. A gang
    spanning nodes gets one attempt: rank 0 on the first node, an AttemptRank on each other.
    All or nothing: a refusal (ValueError, a lost race, a GPU still bound) binds nothing."""
    with transaction.atomic():
        return _place(placement, now)


def _place(placement: P.Placement, now: datetime) -> Attempt:
    job = Job.objects.get(pk=placement.job_id)
    seats = [_seat(job, alloc, now) for alloc in placement.allocations]
    if sum(len(s.gpus) for s in seats) != job.gpus or len({s.node.pk for s in seats}) != len(seats):
        raise ValueError(f"job {job.pk}: allocations {placement.allocations} do not match its "
                         f"{job.gpus} GPUs")
    islands = {s.node.island for s in seats}
    # the round saw one island; a node may have registered again since with another
    if len(seats) > 1 and (len(islands) > 1 or "" in islands):
        raise ValueError(f"job {job.pk}: {', '.join(s.node.name for s in seats)} are not "
                         f"nodes of one island")
    lease_end = now + timedelta(seconds=settings.GPUSCHED_LEASE_SECONDS)
    first, *others = seats
    attempt = Attempt.objects.create(job=job, node=first.node, gpu_indices=first.indices,
                                     token=next_token(), lease_expires_at=lease_end)
    AttemptRank.objects.bulk_create([
        AttemptRank(attempt=attempt, rank=rank, node=seat.node, gpu_indices=seat.indices,
                    lease_expires_at=lease_end) for rank, seat in enumerate(others, start=1)])
    # The partial unique index refuses a GPU that is still bound (invariant 2).
    GpuBinding.objects.bulk_create([GpuBinding(gpu=g, attempt=attempt)
                                    for seat in seats for g in seat.gpus])
    where = "; ".join(f"{s.node.name} GPUs {s.indices}" for s in seats)
    transition(job, JobState.SCHEDULED, attempt=attempt, reason=f"placed on {where}",
               pending_code="", pending_reason="", pending_what_if="", estimated_start=None,
               nominated_node=None, nominated_gpus=[], nominated_peers=[])
    return attempt


def _seat(job: Job, alloc: P.Allocation, now: datetime) -> Seat:
    """The node's share, its rows locked and read again: the round decided on a snapshot,
    and since then an operator may have cordoned or drained the node, given it to one
    organization, or taken a GPU out, each an update of the rows locked here."""
    node = Node.objects.select_for_update(no_key=True).get(name=alloc.node)
    gpus = list(Gpu.objects.select_for_update(no_key=True).filter(
        node=node, index__in=alloc.gpus, health=Gpu.Health.HEALTHY))
    if len(gpus) != len(alloc.gpus) or not gpus:
        raise ValueError(f"job {job.pk}: {node.name} has no healthy GPUs {sorted(alloc.gpus)}")
    misfit = _misfit(job, node) or _closed(job, node, now)
    if misfit:
        raise ValueError(f"job {job.pk}: {node.name} {misfit}")
    return Seat(node, gpus)


def _closed(job: Job, node: Node, now: datetime) -> str:
    """Why the node takes no new work from `job` now, as the snapshot would say it."""
    if not schedulable(node, now):
        return f"is {node.state.lower()} or silent"
    begins = begins_at(node)
    if node.dedicated_to_id not in (None, job.organization_id) and (
            begins is None or begins <= now.timestamp()):
        return "is dedicated to another organization"
    return ""


def _misfit(job: Job, node: Node) -> str:
    """What of the job's request, as its row says now, `node` does not meet. The round
    decided on a snapshot, and the request may have changed since (services/amend.py)."""
    if job.gpu_types and node.gpu_type not in job.gpu_types:
        return f"has {node.gpu_type}, not one of {', '.join(job.gpu_types)}"
    if node.gpu_memory_mb < job.min_gpu_memory_mb:
        return f"has {node.gpu_memory_mb} MB a GPU, under {job.min_gpu_memory_mb}"
    if job.region and node.region != job.region:
        return f"is in region {node.region or 'none'}, not {job.region}"
    return ""


def _nominate(placement: P.Placement) -> bool:
    """Promise the GPUs the placement's victims are freeing to its job (nominations.py);
    False for a job no longer waiting (cancelled, held since the round read it)."""
    first, *others = placement.allocations
    node = Node.objects.filter(name=first.node).first()
    return bool(Job.objects.filter(pk=placement.job_id, state=JobState.QUEUED).update(
        nominated_node=node, nominated_gpus=sorted(first.gpus),
        nominated_peers=[{"node": a.node, "gpus": sorted(a.gpus)} for a in others]))


def publish(attempt: Attempt, placement: P.Placement) -> None:
    """Send each of the attempt's nodes its part, in the placement's order (place): the first
    runs the attempt (rank 0), each other one rank of it."""
    from workers.queues import node_queue
    from workers.tasks import run_attempt, run_rank

    leader, *others = (alloc.node for alloc in placement.allocations)
    run_attempt.apply_async(args=[attempt.pk, attempt.token], queue=node_queue(leader))
    for rank, node in enumerate(others, start=1):
        run_rank.apply_async(args=[attempt.pk, attempt.token, rank], queue=node_queue(node))


def _request_preemption(pre: P.Preemption, now: datetime) -> bool:
    attempt = Attempt.objects.select_related("job").get(pk=pre.attempt_id)
    if attempt.ended_at or attempt.stop_requested or attempt.job.state != JobState.RUNNING:
        return False
    updated = Attempt.objects.filter(pk=attempt.pk, stop_requested="", ended_at__isnull=True
                                     ).update(stop_requested="preempt",
                                              stop_deadline=now + timedelta(seconds=pre.grace_s),
                                              preempted_for_id=pre.for_job_id)
    if updated:
        transition(attempt.job, JobState.PREEMPTING, attempt=attempt,
                   reason=f"preempted for job {pre.for_job_id}; grace {pre.grace_s:.0f}s")
        Job.objects.filter(pk=pre.for_job_id, state=JobState.QUEUED).update(
            pending_code="preempting", estimated_start=now + timedelta(seconds=pre.grace_s),
            pending_reason=f"GPUs on {attempt.node.name} are being freed for it",
            pending_what_if="")
    return bool(updated)


def apply_decisions(decisions: P.Decisions, now: datetime, *, held: Held | None = None
                    ) -> ApplyReport:
    """`held`: what the queue's rows held when read (reasons.write_reasons)."""
    report = ApplyReport()
    with transaction.atomic():
        # first: what follows writes reasons of its own (a preemptor's), which `held` has
        # not seen, and must have the last word
        report.reasons_written = write_reasons(decisions.pending, held=held)
        gone: set[int] = set()  # preemptors that stopped waiting: their victims run on
        for placement in decisions.placements:
            if placement.preempted:
                if not _nominate(placement):  # its GPUs are still held by victims
                    gone.add(placement.job_id)
                continue
            try:  # a refused placement leaves the others intact
                attempt = place(placement, now)
            except (TransitionError, IntegrityError, ValueError, Job.DoesNotExist,
                    Node.DoesNotExist) as exc:
                log.warning("placement of job %s refused: %s", placement.job_id, exc)
                report.refused += 1
                continue
            report.placed += 1
            # robust: a send the broker refuses is logged, the others still go, and the try
            # it was for queues again once its lease runs out (reaper.py)
            transaction.on_commit(lambda a=attempt, p=placement: publish(a, p), robust=True)
        for pre in decisions.preemptions:
            if pre.for_job_id in gone:
                continue
            try:
                with transaction.atomic():  # a victim that moved on leaves the rest intact
                    report.preempted += _request_preemption(pre, now)
            except TransitionError as exc:
                log.warning("preemption of attempt %s refused: %s", pre.attempt_id, exc)
    return report
