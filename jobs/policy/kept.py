"""Reservations kept from the previous round, and higher tiers taking them over.

`keep_holds` runs before the walk: a job past its tier's start SLO that held a single-node
reservation in the previous round (`Snapshot.holds`) keeps it, highest tier then oldest, one
per org and tier, within the round's reservation budget. It starts now when all its held
GPUs are free, and otherwise holds the same node again unless another frees up
`hold_move_s` sooner. A gang spanning nodes is planned again in the walk: held islands kept
GPUs idle for hours (docs/policy.md).

A higher tier may take a lower tier's reservation over: its idle GPUs (`take_over`), or its
node as a preemption target, and its earliest start counts those nodes (`lower_held`).
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import TYPE_CHECKING

from .pools import Pools, largest_node, pool_ids
from .queues import heads_before
from .types import Allocation, QueuedJob

if TYPE_CHECKING:
    from .gpusched import _Round

_INF = float("inf")
_LEVEL = attrgetter("level")


def keep_holds(rnd: _Round) -> None:
    held = rnd.snap.holds
    levels, tiers, frac = rnd.levels, rnd.snap.tiers, rnd.cfg.keep_after_slo_fraction
    jobs = [j for j in rnd.queue.held if j.tier in levels]  # found while grouping the queue
    jobs.sort(key=lambda j: (-levels[j.tier], j.enqueued_at, j.job_id))
    orgs: set[tuple[str, str]] = set()
    starve_after = math.inf if rnd.cfg.starve_after_s is None else rnd.cfg.starve_after_s
    starving = {t: _starving(rnd, t) for t in {j.tier for j in jobs}}
    for job in jobs:
        waited = rnd.now - job.enqueued_at
        if waited < frac * tiers[job.tier].start_slo_s:
            continue
        # a tier's starving jobs go first (ranking.py): no younger job's hold goes before them
        if starving[job.tier] and waited < starve_after:
            continue
        # one kept reservation per org and tier: the others are re-ranked in the walk
        if ((job.tier, job.org) in orgs or not rnd._may_reserve(job)
                or rnd.over_cap(job)):
            continue
        orgs.add((job.tier, job.org))
        groups = rnd.index.matching(job)
        plan = held[job.job_id]
        if not groups or len(plan) > 1 or job.gpus > largest_node(groups):
            continue
        found = _kept_plan(rnd, job, groups, plan)
        if found is None:
            continue
        start, node = found
        # "free at now" on the timeline may be an attempt overrunning its predicted end
        if len(rnd.index.free[node]) >= job.gpus:
            rnd._commit(job, (Allocation(node, rnd.index.take(node, job.gpus)),))
            rnd.kept[job.job_id] = None
            rnd.queue.late.started_early(job)
        else:
            rnd.kept[job.job_id] = rnd._hold(job, start, {node: job.gpus},
                                               from_last_round=True)


def _starving(rnd: _Round, tier: str) -> bool:
    """Whether a job of the tier that may start this round waited `starve_after_s`: the walk
    considers it first in its tier (ranking.py), so no younger job's kept hold goes before it.
    A starving job of an org or project at its cap starts nothing and holds back nobody's
    reservation."""
    queue, starve_after = rnd.queue.tiers[tier], rnd.cfg.starve_after_s
    if starve_after is None or not rnd.queue.starves(queue):
        return False
    heads = heads_before(queue, rnd.now - starve_after)
    return any(not rnd.over_cap(j) for j in heads)


def _kept_plan(
    rnd: _Round, job: QueuedJob, groups: Pools, held: dict[str, int]
) -> tuple[float, str] | None:
    """The held node, unless it cannot hold the job any more or another frees up sooner."""
    allowed = pool_ids(groups)
    index, timeline = rnd.index, rnd.timeline
    (node, count), = held.items()
    usable = (count == job.gpus and node in index.node and node not in timeline.reserved
              and id(index.pool_of[node]) in allowed and count <= index.pool_of[node].size
              and index.pool_of[node].until is None)  # a node given a maintenance window
    start = timeline.time_k(node, count) if usable else _INF
    fresh = timeline.earliest(groups, job.gpus)
    if fresh is not None and fresh[0] < start - rnd.cfg.hold_move_s:
        return fresh
    return (start, node) if start < _INF else None


def take_over(
    rnd: _Round, groups: Pools, k: int, level: int, key: tuple
) -> tuple[Allocation, ...] | None:
    """A lower tier's reservation whose node holds the job now with its idle GPUs.

    Idle reserved GPUs only shrink until the next reservation is made, so a gang that found
    none stays unplaceable this way until then (`no_take_over_min`).
    """
    key = (*key, level)
    if k >= rnd.no_take_over_min.get(key, 1 << 30):
        return None
    allowed = pool_ids(groups)
    index = rnd.index
    # the lowest tier's reservation gives way first
    for hold in sorted(rnd.timeline.holds, key=_LEVEL):
        if hold.level >= level:
            break
        for node, idle in hold.free_now.items():
            pool = index.pool_of[node]
            if id(pool) in allowed and k <= len(index.free[node]) + len(idle):
                rnd._give_up(hold)
                return (Allocation(node, index.take(node, k)),)
    rnd.no_take_over_min[key] = k
    return None


def lower_held(rnd: _Round, groups: Pools, k: int, level: int) -> tuple[float, str] | None:
    """Earliest node reserved for a lower tier, counting its reserved GPUs as free."""
    allowed = pool_ids(groups)
    best = None
    for node, hold in rnd.timeline.hold_of.items():
        pool = rnd.index.pool_of[node]
        if hold.level < level and id(pool) in allowed and k <= pool.size:
            t = rnd.timeline.time_k_taking(node, k)
            if t < _INF and (best is None or t < best[0]):
                best = (t, node)
    return best
