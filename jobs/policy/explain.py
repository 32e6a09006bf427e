"""Why jobs wait: what-if relaxations and the shared reasons for the queue's long tail."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from . import reasons
from .placement import FreeIndex
from .pools import Pool, Pools
from .types import NodeView, PendingReason, QueuedJob

if TYPE_CHECKING:
    from .gpusched import _Round


# The relaxations in words; the API reads them back into the change that takes them
# (jobs/services/relaxations.py), so they are written here only
OTHER_TYPE = "would start now on {gpu_type} if the job allowed that type"
FEWER_GPUS = "would start now with {gpus} GPUs (the job accepts {min_gpus})"
OTHER_TYPE_SOONER = "would start by {start} on {gpu_type} if the job allowed that type"
FEWER_GPUS_SOONER = "would start by {start} with {gpus} GPUs (the job accepts {min_gpus})"
SOONER_S = 60.0  # a later start is no relaxation worth asking a client for


def _other_types(index: FreeIndex, job: QueuedJob) -> list[Pool]:
    """Pools of a GPU type the job does not accept that meet the rest of its request."""
    if not job.gpu_types:
        return []  # it accepts every type
    return [pool for pool in index.pools
            if pool.gpu_type not in job.gpu_types and pool.memory_mb >= job.min_gpu_memory_mb
            and (not job.region or pool.region == job.region) and index.reaches(pool, job)
            and (not pool.owner or pool.owner == job.org)]


def what_if(index: FreeIndex, job: QueuedJob, groups: Pools, span: bool) -> str:
    """A relaxation that would start the job now: another GPU type, or fewer GPUs; on one
    node or, with `span` (PolicyConfig.span_nodes), on nodes of one island."""
    for pool in _other_types(index, job):
        if index.fits_now([[pool]], job.gpus, span):
            return OTHER_TYPE.format(gpu_type=pool.gpu_type)
    if job.min_gpus is not None and job.min_gpus < job.gpus:
        for g in range(job.gpus - 1, max(job.min_gpus, 1) - 1, -1):
            if index.fits_now(groups, g, span):
                return FEWER_GPUS.format(gpus=g, min_gpus=job.min_gpus)
    return ""


def sooner(rnd: _Round, job: QueuedJob, groups: Pools, start: float) -> str:
    """A relaxation that would start a blocked job, estimated to start at `start`, at least
    SOONER_S earlier: the earliest of another GPU type or fewer GPUs, from the same timeline
    of running ends and reservations ahead of it, on one node or across an island."""
    best: tuple[float, str] | None = None
    for pool in _other_types(rnd.index, job):
        at = _earliest_at(rnd, [[pool]], job.gpus)
        if at is not None and (best is None or at < best[0]):
            best = (at, OTHER_TYPE_SOONER.format(
                start=reasons.clock(at, rnd.now), gpu_type=pool.gpu_type))
    if job.min_gpus is not None and job.min_gpus < job.gpus:
        for g in range(job.gpus - 1, max(job.min_gpus, 1) - 1, -1):
            at = _earliest_at(rnd, groups, g)
            if at is not None and (best is None or at < best[0]):
                best = (at, FEWER_GPUS_SOONER.format(
                    start=reasons.clock(at, rnd.now), gpus=g, min_gpus=job.min_gpus))
    return best[1] if best is not None and best[0] <= start - SOONER_S else ""


def _earliest_at(rnd: _Round, groups: Pools, k: int) -> float | None:
    """When k GPUs of the pools are free on one node or, where gangs span nodes, on nodes of
    one island (each search looks only at the pools its kind of gang fits)."""
    one = rnd.timeline.earliest(groups, k)
    island = rnd.timeline.earliest_island(groups, k) if rnd.cfg.span_nodes else None
    return min((f[0] for f in (one, island) if f is not None), default=None)


def no_fit(rnd: _Round, job: QueuedJob, groups: Pools) -> PendingReason:
    """Why a job that no node can hold as asked waits, with the relaxation that would start
    it now: one object per job shape, so a flood of such jobs costs one look per shape."""
    key = ("no_fit", job.gpus, job.min_gpus, job.gpu_types, job.min_gpu_memory_mb, job.region,
           rnd.index.org_key(job))
    reason = rnd.plain_reasons.get(key)
    if reason is None:
        relax = what_if(rnd.index, job, groups, rnd.cfg.span_nodes)
        held, back = out_of_service_could_hold(rnd.snap.nodes, job, rnd.cfg.span_nodes)
        reason = rnd.plain_reasons[key] = (
            reasons.out_of_service(job, back, rnd.now, relax) if held
            else reasons.dedicated(job, relax) if _others_could_hold(rnd, job)
            else reasons.no_fit(job, relax))
    return reason


def _others_could_hold(rnd: _Round, job: QueuedJob) -> bool:
    """Whether nodes dedicated to other organizations could hold the job as asked."""
    if not rnd.index.owned:
        return False
    theirs = [n for n in rnd.snap.nodes
              if n.owner and n.owner != job.org and _could_use(n, job, owned_too=True)]
    return any(n.total_gpus >= job.gpus for n in theirs) or (
        rnd.cfg.span_nodes and sum(n.total_gpus for n in theirs) >= job.gpus)


def out_of_service_could_hold(nodes: list[NodeView], job: QueuedJob, span: bool
                              ) -> tuple[bool, float | None]:
    """Whether nodes out of service now (cordoned, draining, in maintenance or silent) could
    hold the job as asked once back: its wait then ends, where a job no node can hold waits
    for a change to its request or to the fleet. And when the first such node is due back,
    where one is in a maintenance window with an end (None: not known)."""
    off = [n for n in nodes if not n.schedulable and _could_use(n, job)]
    whole = [n for n in off if n.total_gpus >= job.gpus]
    if whole:
        ends = [n.back_at for n in whole if n.back_at is not None]
        return True, min(ends, default=None)  # one is back by then, if not sooner
    if not span or not off:
        return False, None
    islands = {(n.island, n.gpu_type) for n in off}
    gpus: dict[tuple[str, str], int] = defaultdict(int)
    for n in nodes:
        if (n.island, n.gpu_type) in islands and _could_use(n, job):
            gpus[n.island, n.gpu_type] += n.total_gpus
    return any(total >= job.gpus for total in gpus.values()), None


def _could_use(node: NodeView, job: QueuedJob, owned_too: bool = False) -> bool:
    return ((not job.gpu_types or node.gpu_type in job.gpu_types)
            and node.gpu_memory_mb >= job.min_gpu_memory_mb
            and (not job.region or node.region == job.region)
            and (owned_too or not node.owner or node.owner == job.org))


def windows_in_way(rnd: _Round, job: QueuedJob) -> PendingReason:
    """Why a job that only nodes leaving service before its time limit ends could hold waits:
    they leave by the last of their windows (it starts once they are back). Other nodes it
    may use are too small for it."""
    windowed = [p for g in rnd.index.matching_ever(job) for p in g if p.until is not None]
    until = max(p.until for p in windowed if p.until is not None)
    if all(p.upcoming for p in windowed):  # dedications ahead, not maintenance
        return reasons.dedicated_from(job, until, rnd.now)
    return reasons.maintenance(job, until, rnd.now)


def explain_rest(rnd: _Round) -> None:
    """Shared reasons for the jobs the walk never reached: a run per project it did not
    reach, a run per user of those it did."""
    pending = rnd.out.pending
    by_class: dict[tuple[str, str, str, str], PendingReason] = {}
    for project, jobs, first in rnd.queue.unreached():
        tier, org = project.tier, project.org
        if rnd.queue.org_excluded(tier, org):
            cls = (tier, org, "", "")
        elif project.excluded:
            cls = (tier, org, project.name, "")
        elif project.users and project.users[jobs[first].user].excluded:
            cls = (tier, org, "", jobs[first].user)  # a run is one user's once split
        else:
            cls = (tier, "", "", "")
        reason = by_class.get(cls)
        if reason is None:
            reason = by_class[cls] = _shared_reason(rnd, *cls)
        pending.add_run(jobs, first, reason)
    _count_late(rnd)
    # jobs started from kept reservations may lie past where the walk stopped
    pending.mark_placed([job_id for job_id, hold in rnd.kept.items() if hold is None])
    for job in rnd.queue.unknown:
        pending[job.job_id] = reasons.unknown_tier(job.tier)


def no_capacity(rnd: _Round) -> None:
    """Every queued job's reason while no node takes work (all down, cordoned or silent)."""
    back = min((n.back_at for n in rnd.snap.nodes if n.back_at is not None), default=None)
    reason = reasons.no_capacity(back, rnd.now)
    for _, jobs, first in rnd.queue.unreached():
        rnd.out.pending.add_run(jobs, first, reason)
    for job in rnd.queue.unknown:
        rnd.out.pending[job.job_id] = reasons.unknown_tier(job.tier)


def _shared_reason(rnd: _Round, tier: str, org: str, project: str, user: str
                   ) -> PendingReason:
    """The reason of a run of unreached jobs: of an org (and project, or user) at its cap
    where they are named, else of the tier's jobs."""
    if user:
        return reasons.user_cap(org, user, rnd.snap.user_gpu_caps[org, user])
    if project:
        return reasons.project_cap(org, project, rnd.snap.project_gpu_caps[org, project])
    if org:
        return reasons.org_cap(org, rnd.snap.org_gpu_caps.get(org, 0))
    if rnd.queue.tier_excluded(tier):
        return reasons.tier_ceiling(tier, rnd.ceilings[tier])
    level = rnd.levels[tier]
    above = [t for lv, t in sorted(rnd.waiting_levels.items(), reverse=True) if lv > level]
    if above and rnd.shares.tier[tier] > rnd.floors[tier]:
        return reasons.tier_share(tier, rnd.floors[tier], above[0])
    return reasons.priority(tier)


def _count_late(rnd: _Round) -> None:
    """Capacity advice for the jobs the walk never reached (advice.LateTail)."""
    queue = rnd.queue

    def capped(tier: str, org: str) -> bool:
        return queue.tier_excluded(tier) or queue.org_excluded(tier, org)

    for gpu_type, gpus in queue.late.short_by_type(capped).items():
        rnd.short[gpu_type] += gpus
