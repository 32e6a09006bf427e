"""Where a round's walk stops: past `backfill_depth` jobs after the first blocked one, or
once no job further down could start, reserve or preempt (docs/policy.md, "Backfill and
reservations"); the rest of the queue then gets shared reasons (explain.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .gpusched import _Round


def exhausted(rnd: _Round) -> bool:
    if rnd.after_block is None:
        return False  # the head of the queue always gets a full answer
    if rnd.after_block >= rnd.cfg.backfill_depth:
        return True
    if rnd.index.total_free > 0:
        return False
    # with nothing free, a job further down could only get idle reserved GPUs (and, while
    # some are idle, reserve) or preempt; when none of that is left, the rest of the walk
    # would only repeat "blocked"
    if rnd.timeline.idle_reserved and (_idle_reachable(rnd) or _may_reserve_any(rnd)):
        return False
    return rnd.preempt_tries >= rnd.cfg.max_preemptors_per_round or not rnd.victims.by_node


def _idle_reachable(rnd: _Round) -> bool:
    """Whether a job further down could still start on idle reserved GPUs: borrow them, or
    take a lower tier's reservation over (kept.take_over), which a job does unless it yields
    to a blocked higher tier (yielding.guard). Neither can change while nothing starts:
    blocked tiers only add up, shares stand still."""
    if rnd.timeline.may_lend(rnd.queue.shortest_limit):
        return True
    low = rnd.timeline.lowest_idle_level()
    for tier in rnd.queue.live_tiers():
        level = rnd.levels[tier]
        if level > low and (all(lv <= level for lv in rnd.blocked_k)
                            or rnd.shares.tier[tier] + 1 <= rnd.floors[tier]):
            return True
    return False


def _may_reserve_any(rnd: _Round) -> bool:
    """Whether a reservation budget is left for a blocked job of one GPU."""
    holds = len(rnd.timeline.holds)
    return holds < rnd.cfg.max_reservations or (
        holds < rnd.cfg.max_budget_reservations and rnd.reserved_gpus < rnd.reserve_cap)
