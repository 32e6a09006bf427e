"""Lower tiers yield to blocked higher-tier gangs (docs/policy.md, "Backfill and reservations").

A blocked job that gets no reservation (the budget is spent) is remembered by its tier and
gang size. A job of a lower tier that is not within its own floor may then start only on a
node where it ends before that node could hold the smallest such gang (from the node's
release timeline), or where the node has room for both; it tries at most `guard_scan_nodes`
nodes in best-fit order and otherwise waits with a `tier_share` reason. Without this, free
work above its floor filled the holes that paid gangs drain for.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING

from . import reasons
from .pools import Pools, largest_node
from .types import Allocation, PendingReason, QueuedJob

if TYPE_CHECKING:
    from .gpusched import _Round


def guard(rnd: _Round, job: QueuedJob, level: int) -> int | None:
    """Smallest gang of a blocked, unreserved higher tier, if the job must yield to it.

    A job within its tier's floor never yields.
    """
    if not rnd.blocked_k:
        return None
    if rnd.shares.tier[job.tier] + job.gpus <= rnd.floors[job.tier]:
        return None
    found = [k for lv, k in rnd.blocked_k.items() if lv > level]
    return min(found) if found else None


def guarded_allocate(
    rnd: _Round, groups: Pools, k: int, level: int, ends: float, need: int
) -> tuple[Allocation, ...] | None:
    """A node where the job ends before the node could hold a gang of `need` GPUs."""
    if k > largest_node(groups):
        return None  # a multi-node gang of a lower tier waits for the higher tier
    time_k = rnd.timeline.time_k
    nodes = islice(rnd.index.candidates(groups, k, level), rnd.cfg.guard_scan_nodes)
    for node in nodes:
        size = rnd.index.pool_of[node].size
        want = min(need, size)
        ready = time_k(node, want)
        if ends <= ready or (want + k <= size and time_k(node, want + k) <= ready):
            return (Allocation(node, rnd.index.take(node, k)),)
    return None


def remember_blocked(rnd: _Round, job: QueuedJob, level: int) -> None:
    """Remember a blocked job without a reservation: lower tiers yield to its gang."""
    k = rnd.blocked_k.get(level)
    if k is None or job.gpus < k:
        rnd.blocked_k[level] = job.gpus
        rnd.blocked_tier[level] = job.tier


def reason(rnd: _Round, job: QueuedJob) -> PendingReason:
    level = rnd.levels[job.tier]
    above = max((lv for lv in rnd.blocked_k if lv > level), default=None)
    waiting = rnd.blocked_tier[above] if above is not None else "a higher tier"
    return reasons.tier_share(job.tier, rnd.floors[job.tier], waiting)
