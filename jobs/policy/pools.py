"""Pools of schedulable nodes that share GPU type, memory and region (and a maintenance window
or a dedication, where they have one): what the free-GPU index (placement.py) buckets nodes
by, and what a job's matching lists, by GPU type in its order of preference."""

from __future__ import annotations

from dataclasses import dataclass, field

Pools = list[list["Pool"]]  # one list of pools per allowed GPU type, in preference order


@dataclass(slots=True, eq=False)
class Pool:
    """Schedulable nodes with the same GPU type, GPU memory and region."""

    gpu_type: str
    memory_mb: int
    region: str
    size: int = 0  # GPUs per node (the largest node of the pool)
    # buckets[c]: nodes with exactly c free, unreserved GPUs (dict used as an ordered set)
    buckets: list[dict[str, None]] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    free_total: int = 0
    # labeled[c][label]: the nodes of buckets[c] whose label (highest tier level running) is
    # `label`; -1 for nodes that run nothing
    labeled: list[dict[int, dict[str, None]]] = field(default_factory=list)
    until: float | None = None  # its nodes leave service then (maintenance window)
    window: int = 1 << 30  # rank of `until` among the index's windows (none: past them all)
    owner: str = ""  # the organization its nodes are dedicated to ("": shared)
    upcoming: str = ""  # the organization they are dedicated to from `until` on


def pool_ids(groups: Pools) -> set[int]:
    """Identities of the pools a job may use, for membership tests on a node's pool."""
    return {id(p) for g in groups for p in g}


def largest_node(groups: Pools) -> int:
    """GPUs of the largest node the allowed pools have: a bigger gang spans nodes."""
    return max(p.size for g in groups for p in g)


def tightest(pools, k: int) -> str | None:
    """The node with the fewest free GPUs that still holds `k` (best fit), or None."""
    best, best_c = None, 1 << 30
    for pool in pools:
        if pool.free_total < k or k > pool.size:
            continue
        for c in range(k, min(best_c, pool.size + 1)):
            bucket = pool.buckets[c]
            if bucket:
                best, best_c = next(iter(bucket)), c
                break
    return best
