"""Which tier the next job comes from (ranking.py, "Tiers"): a tier below its floor first,
then by rank, its level plus the aging of its oldest head job; tiers that share a priority
age as one and go lowest weighted share first."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping

from .queues import TierQueue, is_head
from .types import PolicyConfig


def oldest_wait_h(tier: TierQueue, now: float) -> float | None:
    """Hours the tier's oldest job still to consider has waited, heading its user's jobs in
    a project of an org and project not at their caps (stale heap entries are dropped)."""
    heap = tier.oldest
    while heap:
        enq, _, pos, project, user = heap[0]
        # an entry is pushed only for a job left to consider: pos < len(its list)
        if (is_head(project, user, pos) and not project.excluded
                and not tier.orgs[project.org].excluded):
            return max(0.0, now - enq) / 3600.0
        heapq.heappop(heap)
    return None


def tier_rank(tier: TierQueue, wait_h: float, cfg: PolicyConfig) -> float:
    boost = min(cfg.aging_per_hour * wait_h, cfg.max_age_boost)
    return tier.level * cfg.tier_gap + boost


def best_tier(tiers: Iterable[TierQueue], used: Mapping[str, int],
              floors: Mapping[str, float], cfg: PolicyConfig, now: float) -> TierQueue | None:
    """Where every tier has a priority of its own; a tier's rank is cached until a pop."""
    best, best_key = None, None
    for tier in tiers:
        if tier.excluded or tier.live <= 0:
            continue
        rank = tier.rank
        if rank is None:  # stale: the tier's oldest head may have changed
            wait_h = oldest_wait_h(tier, now)
            if wait_h is None:
                continue
            rank = tier.rank = tier_rank(tier, wait_h, cfg)
        name = tier.spec.name
        key = (used[name] < floors.get(name, 0.0), rank)
        if best_key is None or key > best_key:
            best, best_key = tier, key
    return best


def best_tier_weighted(tiers: Iterable[TierQueue], used: Mapping[str, int],
                       floors: Mapping[str, float], cfg: PolicyConfig, now: float,
                       share: Callable[[TierQueue], float]) -> TierQueue | None:
    """As best_tier, where some tiers share a priority: such tiers age as one (by the
    oldest job among them) and go lowest weighted `share` first, as orgs do in a tier."""
    live = []
    for tier in tiers:
        if not tier.excluded and tier.live > 0:
            wait_h = oldest_wait_h(tier, now)
            if wait_h is not None:
                live.append((tier, tier_rank(tier, wait_h, cfg)))
    rank_of_level: dict[int, float] = {}
    for tier, rank in live:
        rank_of_level[tier.level] = max(rank, rank_of_level.get(tier.level, rank))
    best, best_key = None, None
    for tier, _ in live:
        name = tier.spec.name
        key = (used[name] < floors.get(name, 0.0), rank_of_level[tier.level], -share(tier))
        if best_key is None or key > best_key:
            best, best_key = tier, key
    return best
