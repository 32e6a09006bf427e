"""Baseline policies the gpusched policy is measured against. Pure functions, no Django.

* `priority_decide`: what Celery priority queues give you. One FIFO queue per tier, tiers
  served strictly by `TierSpec.priority` (highest first), first-fit, no preemption, no
  backfill. Head-of-line blocking is per tier: inside a tier, the first job that does not fit
  blocks every later job of that tier (a FIFO consumer cannot skip its head); the GPUs still
  free after a tier is blocked go to the next tier down (a worker with free slots polls the
  next queue). A job no node or island could ever hold is skipped with reason
  "unsatisfiable" instead of blocking its tier forever.

* `multifactor_decide`: Slurm's priority/multifactor plugin with sched/backfill in its EASY
  form (one reservation). References: https://slurm.schedmd.com/priority_multifactor.html,
  https://slurm.schedmd.com/classic_fair_share.html, https://slurm.schedmd.com/sched_config.html
  and the backfill description in slurm.conf(5) ("lower-priority jobs start only if doing so
  does not delay the expected initiation time of any higher priority job").

      priority = W_AGE * age + W_FAIRSHARE * fairshare + W_QOS * qos  (+ W_JOBSIZE * size)

  - age = min(1, wait / PriorityMaxAge), PriorityMaxAge = 7 days (Slurm's default); the wait
    is counted from `QueuedJob.enqueued_at`.
  - fairshare: the classic algorithm (PriorityFlags=NO_FAIR_TREE), F = 2 ** (-UE / S), over
    the association tree root -> tier -> organization -> project -> user, the job charging
    its user (`classic_fairshare.py`: effective usage UE and normalized shares S as Slurm
    computes them, from decayed usage and the tier, organization, project and user weights).
  - qos = tier priority / highest tier priority (Slurm's QOS factor, priority / max priority).
  - size: PriorityWeightJobSize = 0 by default (Slurm's default too); set W_JOBSIZE to favor
    big jobs as Slurm does without PriorityFavorSmall.
  - weights: W_QOS = 10000, W_FAIRSHARE = 10000, W_AGE = 1000, a common site configuration
    where the paid level and fair share dominate and age breaks ties.

  EASY backfill: jobs start in priority order while they fit; the first one that does not fit
  gets a reservation at the earliest time enough GPUs free up, computed from running
  attempts' *time limits* (`time_limit_end`, as Slurm does, never predictions). Every later
  job (up to `PolicyConfig.backfill_depth`, Slurm's bf_max_job_test) starts now only if it
  fits and either ends (by its time limit) before the reservation or uses only GPUs the
  reservation does not need. No preemption.

Both give every unplaced queued job a PendingReason. Gang jobs larger than any node span nodes
inside one island (`NodeView.island`), whole free nodes first.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .classic_fairshare import classic_fairshare
from .types import (
    Allocation,
    Decisions,
    NodeView,
    PendingReason,
    Placement,
    QueuedJob,
    Reservation,
    Snapshot,
)

W_AGE = 1_000.0
W_FAIRSHARE = 10_000.0
W_QOS = 10_000.0
W_JOBSIZE = 0.0
PRIORITY_MAX_AGE_S = 7 * 86_400.0


def _eligible(job: QueuedJob, node: NodeView, now: float) -> bool:
    if not node.schedulable:
        return False
    if node.until is not None and now + job.time_limit_s > node.until and not (
            node.upcoming and node.upcoming == job.org):
        return False  # its time limit ends after the node leaves service, or leaves it to
        # the organization it is dedicated to from then
    if job.gpu_types and node.gpu_type not in job.gpu_types:
        return False
    if job.region and node.region != job.region:
        return False
    if node.owner and node.owner != job.org:
        return False  # dedicated to another organization, as a Slurm reservation's nodes
    return node.gpu_memory_mb >= job.min_gpu_memory_mb


@dataclass(slots=True)
class Fleet:
    """Free GPUs per node during one decision round."""

    nodes: list[NodeView]
    free: dict[str, list[int]]
    _groups: dict[tuple, list[list[NodeView]]]
    _max_free: int | None = None
    span_nodes: bool = True  # PolicyConfig.span_nodes
    now: float = 0.0
    windows: bool = False  # some node has a maintenance window (NodeView.until)
    # the organizations some node is dedicated to, now or ahead (NodeView.owner, upcoming)
    owners: frozenset[str] = frozenset()

    @classmethod
    def of(cls, snapshot: Snapshot) -> Fleet:
        nodes = [n for n in snapshot.nodes if n.schedulable]
        return cls(nodes, {n.name: sorted(n.free_gpus) for n in nodes}, {},
                   span_nodes=snapshot.config.span_nodes, now=snapshot.now,
                   windows=any(n.until is not None for n in nodes),
                   owners=frozenset(o for n in nodes for o in (n.owner, n.upcoming) if o))

    def max_free(self) -> int:
        if self._max_free is None:
            self._max_free = max((len(v) for v in self.free.values()), default=0)
        return self._max_free

    def groups(self, job: QueuedJob) -> list[list[NodeView]]:
        """Candidate node groups: single nodes if one can ever hold the job, else islands."""
        key = (job.gpus, job.gpu_types, job.min_gpu_memory_mb, job.region,
               job.time_limit_s if self.windows else 0.0,
               job.org if job.org in self.owners else "")
        found = self._groups.get(key)
        if found is None:
            found = self._groups[key] = self._find_groups(job)
        return found

    def _find_groups(self, job: QueuedJob) -> list[list[NodeView]]:
        elig = [n for n in self.nodes if _eligible(job, n, self.now)]
        single = [[n] for n in elig if n.total_gpus >= job.gpus]
        if single or not self.span_nodes:
            return single
        islands: dict[str, list[NodeView]] = defaultdict(list)
        for n in elig:
            islands[n.island].append(n)
        return [g for g in islands.values() if sum(n.total_gpus for n in g) >= job.gpus]

    def place(self, job: QueuedJob, groups: list[list[NodeView]],
              cap: dict[str, int] | None = None) -> tuple[Allocation, ...] | None:
        """First group with room now; `cap` limits GPUs usable per node (backfill)."""
        if len(groups[0]) == 1 and job.gpus > self.max_free():
            return None
        for group in groups:
            room = {n.name: len(self.free[n.name]) for n in group}
            if cap is not None:
                room = {k: min(v, cap.get(k, v)) for k, v in room.items()}
            if len(group) == 1:
                name = group[0].name
                if room[name] >= job.gpus:
                    return (Allocation(name, tuple(self.free[name][: job.gpus])),)
                continue
            if sum(room.values()) < job.gpus:
                continue
            need, allocs = job.gpus, []
            for n in sorted(group, key=lambda n: -room[n.name]):
                take = min(need, room[n.name])
                if take:
                    allocs.append(Allocation(n.name, tuple(self.free[n.name][:take])))
                    need -= take
                if not need:
                    return tuple(allocs)
        return None

    def take(self, allocs: tuple[Allocation, ...]) -> None:
        self._max_free = None
        for a in allocs:
            used = set(a.gpus)
            self.free[a.node] = [g for g in self.free[a.node] if g not in used]


def _unsatisfiable(job: QueuedJob) -> PendingReason:
    return PendingReason("unsatisfiable", f"no node or island can hold {job.gpus} GPUs "
                         "of the requested type", what_if="ask for fewer GPUs or any GPU type")


def serve_fifo(jobs: list[QueuedJob], fleet: Fleet, out: Decisions, queue: str) -> None:
    """One FIFO queue consumer: start jobs in arrival order until the head does not fit."""
    blocked: QueuedJob | None = None
    for job in sorted(jobs, key=lambda j: (j.enqueued_at, j.job_id)):
        if blocked is not None:
            out.pending[job.job_id] = PendingReason(
                "priority_queue", f"behind job {blocked.job_id} in the {queue} queue")
            continue
        groups = fleet.groups(job)
        if not groups:
            out.pending[job.job_id] = _unsatisfiable(job)
            continue
        allocs = fleet.place(job, groups)
        if allocs is None:
            blocked = job
            out.pending[job.job_id] = PendingReason(
                "resources", f"head of the {queue} queue: waiting for {job.gpus} free GPUs")
            continue
        fleet.take(allocs)
        out.placements.append(Placement(job.job_id, allocs))


def priority_decide(snapshot: Snapshot) -> Decisions:
    """Strict tier order, FIFO within a tier, head-of-line blocking per tier (module doc)."""
    out, fleet = Decisions(), Fleet.of(snapshot)
    by_tier: dict[str, list[QueuedJob]] = defaultdict(list)
    for job in snapshot.queued:
        by_tier[job.tier].append(job)

    def rank(tier: str) -> int:
        spec = snapshot.tiers.get(tier)
        return spec.priority if spec else -(10**9)

    for tier in sorted(by_tier, key=rank, reverse=True):
        serve_fifo(by_tier[tier], fleet, out, tier)
    return out


def multifactor_priority(snapshot: Snapshot) -> dict[int, float]:
    """Slurm multifactor priority of each queued job (formula in the module docstring)."""
    now = snapshot.now
    max_tier = max((t.priority for t in snapshot.tiers.values()), default=1) or 1
    fairshare = classic_fairshare(snapshot)
    total_gpus = sum(n.total_gpus for n in snapshot.nodes) or 1
    prio: dict[int, float] = {}
    for j in snapshot.queued:
        age = min(1.0, max(0.0, now - j.enqueued_at) / PRIORITY_MAX_AGE_S)
        spec = snapshot.tiers.get(j.tier)
        qos = (spec.priority / max_tier) if spec else 0.0
        size = min(1.0, j.gpus / total_gpus)
        fs = fairshare.get((j.org, j.project, j.user), 0.0)
        prio[j.job_id] = W_AGE * age + W_FAIRSHARE * fs + W_QOS * qos + W_JOBSIZE * size
    return prio


@dataclass(slots=True)
class _Shadow:
    """EASY reservation of the top blocked job: start time and spare GPUs per node then."""

    start_at: float
    allocs: tuple[Allocation, ...]
    spare: dict[str, int]


def _releases(snapshot: Snapshot, placed: list[tuple[float, tuple[Allocation, ...]]]):
    rel: dict[str, list[tuple[float, tuple[int, ...]]]] = defaultdict(list)
    items = [(max(snapshot.now, r.time_limit_end), r.allocations) for r in snapshot.running]
    for end, allocs in items + placed:
        for a in allocs:
            rel[a.node].append((end, a.gpus))
    for v in rel.values():
        v.sort()
    return rel


def _shadow(job: QueuedJob, groups: list[list[NodeView]], fleet: Fleet,
            rel: dict[str, list[tuple[float, tuple[int, ...]]]], now: float) -> _Shadow | None:
    best: tuple[float, list[NodeView]] | None = None
    for group in groups:
        events = sorted((t, len(g)) for n in group for t, g in rel.get(n.name, ()))
        avail = sum(len(fleet.free[n.name]) for n in group)
        start = None if avail < job.gpus else now
        for t, k in events:
            if start is not None:
                break
            avail += k
            if avail >= job.gpus:
                start = t
        if start is not None and (best is None or start < best[0]):
            best = (start, group)
    if best is None:
        return None
    start_at, group = best
    spare: dict[str, int] = {}
    avail_at: dict[str, list[int]] = {}
    for n in fleet.nodes:
        gpus = list(fleet.free[n.name])
        for t, g in rel.get(n.name, ()):
            if t <= start_at:
                gpus.extend(g)
        avail_at[n.name] = sorted(gpus)
        spare[n.name] = len(gpus)
    need, allocs = job.gpus, []
    for n in sorted(group, key=lambda n: -len(avail_at[n.name])):
        take = min(need, len(avail_at[n.name]))
        if take:
            allocs.append(Allocation(n.name, tuple(avail_at[n.name][:take])))
            spare[n.name] -= take
            need -= take
        if not need:
            break
    return _Shadow(start_at, tuple(allocs), spare)


def multifactor_decide(snapshot: Snapshot) -> Decisions:
    """Slurm multifactor priority + EASY backfill on time limits, no preemption."""
    out, fleet, now = Decisions(), Fleet.of(snapshot), snapshot.now
    prio = multifactor_priority(snapshot)
    queue = sorted(snapshot.queued, key=lambda j: (-prio[j.job_id], j.enqueued_at, j.job_id))
    placed: list[tuple[float, tuple[Allocation, ...]]] = []
    shadow: _Shadow | None = None
    top: QueuedJob | None = None
    depth = snapshot.config.backfill_depth
    for job in queue:
        if top is not None:
            depth -= 1
            if depth < 0:
                out.pending[job.job_id] = PendingReason(
                    "priority", "lower priority; beyond the backfill scan depth this round")
                continue
        groups = fleet.groups(job)
        if not groups:
            out.pending[job.job_id] = _unsatisfiable(job)
            continue
        if top is None:
            allocs = fleet.place(job, groups)
            if allocs is not None:
                fleet.take(allocs)
                placed.append((now + job.time_limit_s, allocs))
                out.placements.append(Placement(job.job_id, allocs))
                continue
            top = job
            shadow = _shadow(job, groups, fleet, _releases(snapshot, placed), now)
            if shadow is not None:
                out.reservations.append(Reservation(job.job_id, shadow.allocs, shadow.start_at))
            out.pending[job.job_id] = PendingReason(
                "resources", f"highest priority job, waiting for {job.gpus} GPUs",
                estimated_start=shadow.start_at if shadow else None)
            continue
        ends_before = shadow is None or now + job.time_limit_s <= shadow.start_at
        allocs = fleet.place(job, groups, None if shadow is None or ends_before else shadow.spare)
        if allocs is None:
            out.pending[job.job_id] = PendingReason(
                "priority", f"lower priority than job {top.job_id}; no backfill window fits")
            continue
        fleet.take(allocs)
        if shadow is not None and not ends_before:
            for a in allocs:
                shadow.spare[a.node] -= len(a.gpus)
        out.placements.append(Placement(job.job_id, allocs))
    return out


__all__ = ["multifactor_decide", "multifactor_priority", "priority_decide"]
