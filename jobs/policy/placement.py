"""Free-GPU index and gang placement.

Free GPUs are indexed by pool (nodes that share GPU type, memory and region) and, inside a
pool, by how many GPUs a node has free. Finding a node for a k-GPU gang is then a walk over
at most `node size` buckets per pool instead of a scan of the fleet, which is what keeps a
decision over 1,000 nodes and 50,000 queued jobs inside its time budget.

Placement is best fit: the node with the fewest free GPUs that still holds the gang, so
whole free nodes stay whole for 8-GPU jobs. With tier affinity (the round labels each node
with the highest tier level running on it), a job first looks at nodes of its own label, then
at nodes of a higher label, then at any partly used node, and only then at a whole free node;
best fit inside each step. Preemptible work thus gathers on nodes of its own tier, and whole
nodes of lower-tier work exist for a higher tier to reclaim with few, cheap victims.
A gang larger than a node takes free GPUs of one island (NVLink island / rack), nodes with
the most free GPUs first, so whole free nodes go first and the gang spans as few nodes as
it can. A gang gets all its GPUs or nothing.

A node dedicated to an organization (`NodeView.owner`) is a pool of its own that only that
organization's jobs match, ahead of the shared pools of the same GPU type, so its own nodes
fill before it takes shared GPUs from others. One dedicated from a time ahead is shared till
then, as a node with a maintenance window then (below), but for its coming owner's jobs,
which no window holds (`NodeView.upcoming`).

A node with a maintenance window (`NodeView.until`) is a pool of its own, which a job may use
only when its time limit ends by then (`pool_key`, `matching`), or, for a job that
checkpoints and that no other node holds now, when it can run a while first
(`windows_to_run_in`); the backfill timeline and the preemption plans, which start jobs
later or on victims' GPUs, leave such pools out.
"""

from __future__ import annotations

from bisect import bisect_left

from .pools import Pool, Pools, largest_node, tightest
from .types import Allocation, NodeView, QueuedJob


class FreeIndex:
    """Free, unreserved GPUs of schedulable nodes, kept in (pool, free count) buckets."""

    def __init__(self, nodes: list[NodeView], now: float = 0.0) -> None:
        self.now = now
        self.node: dict[str, NodeView] = {}
        self.free: dict[str, list[int]] = {}
        self.pool_of: dict[str, Pool] = {}
        self.pools: list[Pool] = []
        self.total_free = 0
        self._match: dict[tuple, Pools] = {}
        self._largest: dict[int, int] = {}  # id of a matched pool list -> its largest node
        self.label: dict[str, int] = {}  # node -> highest tier level running on it, -1: none
        by_key: dict[tuple[str, int, str, float | None, str, str], Pool] = {}
        for n in nodes:
            if not n.schedulable or n.total_gpus <= 0:
                continue
            key = (n.gpu_type, n.gpu_memory_mb, n.region, n.until, n.owner, n.upcoming)
            pool = by_key.get(key)
            if pool is None:
                pool = by_key[key] = Pool(n.gpu_type, n.gpu_memory_mb, n.region, until=n.until,
                                          owner=n.owner, upcoming=n.upcoming)
                self.pools.append(pool)
            pool.size = max(pool.size, n.total_gpus)
            pool.nodes.append(n.name)
            self.node[n.name] = n
            self.pool_of[n.name] = pool
            self.free[n.name] = sorted(n.free_gpus)
        # when windowed nodes leave service, earliest first (usually none)
        self.windows = sorted({p.until for p in self.pools if p.until is not None})
        # the organizations some node is dedicated to, now or ahead (usually none)
        self.owners = {o for p in self.pools for o in (p.owner, p.upcoming) if o}
        self.owned = bool(self.owners)
        for pool in self.pools:
            if pool.until is not None:
                pool.window = self.windows.index(pool.until)
            pool.buckets = [{} for _ in range(pool.size + 1)]
            pool.labeled = [{} for _ in range(pool.size + 1)]
        for name, gpus in self.free.items():
            pool = self.pool_of[name]
            pool.buckets[len(gpus)][name] = None
            pool.labeled[len(gpus)].setdefault(-1, {})[name] = None
            self.label[name] = -1
            pool.free_total += len(gpus)
            self.total_free += len(gpus)

    # -- matching ---------------------------------------------------------------------------

    def pool_key(self, job: QueuedJob) -> tuple:
        """What decides the pools a job may use: its GPU types, memory floor and region;
        where nodes have maintenance windows, which windows its time limit ends before (the
        rank of the first of them it does); where nodes are dedicated, its organization."""
        reach = bisect_left(self.windows, self.now + job.time_limit_s) if self.windows else 0
        if self.owned:
            return (job.gpu_types, job.min_gpu_memory_mb, job.region, reach, self.org_key(job))
        if self.windows:
            return (job.gpu_types, job.min_gpu_memory_mb, job.region, reach)
        return (job.gpu_types, job.min_gpu_memory_mb, job.region)

    def matching(self, job: QueuedJob) -> Pools:
        """Pools a job may use now, grouped by GPU type in the job's preference order
        (cached): those of nodes whose maintenance window its time limit ends before."""
        return self._matched(self.pool_key(job))

    def matching_ever(self, job: QueuedJob) -> Pools:
        """Pools a job could use with no maintenance window in its way."""
        if self.owned:
            return self._matched((job.gpu_types, job.min_gpu_memory_mb, job.region, 0,
                                  self.org_key(job)))
        return self._matched((job.gpu_types, job.min_gpu_memory_mb, job.region))

    def org_key(self, job: QueuedJob) -> str:
        """The job's organization where nodes are dedicated to it, else "": every other
        organization matches the same pools, and shares their cache entries."""
        return job.org if job.org in self.owners else ""

    def windows_to_run_in(self, job: QueuedJob, run_s: float) -> Pools:
        """Pools the job may not use by its time limit but whose window leaves it `run_s`
        to run first: where one that checkpoints starts, to move at the window."""
        if not self.windows or self.now + run_s > self.windows[-1]:
            return []
        groups = [[p for p in group if p.until is not None
                   and self.now + run_s <= p.until < self.now + job.time_limit_s]
                  for group in self.matching_ever(job)]
        return [g for g in groups if g]

    def reaches(self, pool: Pool, job: QueuedJob) -> bool:
        """Whether the job's time limit ends before the pool's nodes leave service (no window
        holds their coming owner's jobs)."""
        return (pool.until is None or self.now + job.time_limit_s <= pool.until
                or bool(pool.upcoming) and pool.upcoming == job.org)

    def _matched(self, key: tuple) -> Pools:
        found = self._match.get(key)
        if found is None:
            found = self._match[key] = self._compute_matching(*key)
            self._largest[id(found)] = largest_node(found) if found else 0
        return found

    def largest(self, groups: Pools) -> int:
        """`largest_node` of pools this index matched, without scanning them again."""
        return self._largest[id(groups)]

    def _compute_matching(self, types: tuple[str, ...], mem: int, region: str,
                          reach: int = 0, org: str = "") -> Pools:
        ok = [p for p in self.pools if p.memory_mb >= mem and (not region or p.region == region)
              and (p.window >= reach or bool(p.upcoming) and p.upcoming == org)
              and (not p.owner or p.owner == org)]
        # any type: one group, best fit across all of them; else a group a type, in order
        groups = [ok] if not types else [[p for p in ok if p.gpu_type == t] for t in types]
        if self.owned:  # the organization's own nodes of each group first
            groups = [part for g in groups
                      for part in ([p for p in g if p.owner], [p for p in g if not p.owner])]
        return [g for g in groups if g]

    # -- tier labels ------------------------------------------------------------------------

    def raise_label(self, name: str, level: int) -> None:
        """The node now runs work of tier level `level` (labels only go up in a round)."""
        old = self.label.get(name)
        if old is None or level <= old:
            return
        labeled = self.pool_of[name].labeled[len(self.free[name])]
        del labeled[old][name]
        labeled.setdefault(level, {})[name] = None
        self.label[name] = level

    # -- single-node best fit ---------------------------------------------------------------

    def best_fit(self, groups: Pools, k: int, level: int | None = None) -> str | None:
        """Node with the fewest free GPUs >= k; the first GPU type that has one wins.

        With a tier `level`, partly used nodes of the same label go first, then nodes of a
        higher label, then any partly used node, then whole free nodes (best fit in each).
        """
        if level is not None:
            return self._affine_fit(groups, k, level)
        for group in groups:
            best = tightest(group, k)
            if best is not None:
                return best
        return None

    def _affine_fit(self, groups: Pools, k: int, level: int) -> str | None:
        for group in groups:
            pools = [p for p in group if p.free_total >= k and k <= p.size]
            if not pools:
                continue
            best, best_c = None, 1 << 30
            for pool in pools:  # same label
                for c in range(k, min(best_c, pool.size)):
                    found = pool.labeled[c].get(level)
                    if found:
                        best, best_c = next(iter(found)), c
                        break
            if best is not None:
                return best
            for pool in pools:  # a higher label
                for c in range(k, min(best_c, pool.size)):
                    for lv, found in pool.labeled[c].items():
                        if lv > level and found:
                            best, best_c = next(iter(found)), c
                            break
                    if best_c == c:
                        break
            if best is not None:
                return best
            best = tightest(pools, k)  # any partly used node, then a whole free one
            if best is not None:
                return best
        return None

    def candidates(self, groups: Pools, k: int, level: int):
        """Nodes with >= k free GPUs in the order `best_fit` prefers them (lazy).

        Used when a node may be refused (a lower tier must not take GPUs a blocked higher
        tier will need): same label, a higher label, any partly used node, whole free nodes;
        fewest free GPUs first inside each step, GPU types in preference order.
        """
        for group in groups:
            pools = [p for p in group if p.free_total >= k and k <= p.size]
            if not pools:
                continue
            for c in range(k, max(p.size for p in pools)):
                for pool in pools:
                    if c < pool.size:
                        yield from pool.labeled[c].get(level, ())
            for c in range(k, max(p.size for p in pools)):
                for pool in pools:
                    if c < pool.size:
                        for lv, found in pool.labeled[c].items():
                            if lv > level:
                                yield from found
            for c in range(k, max(p.size for p in pools) + 1):
                for pool in pools:
                    if c <= pool.size:
                        for lv, found in pool.labeled[c].items():
                            if lv < level or c == pool.size:
                                yield from found

    def take(self, name: str, count: int) -> tuple[int, ...]:
        """Remove `count` free GPUs (lowest indices) of a node from the index."""
        free = self.free[name]
        return self.take_exact(name, free[:count])

    def take_exact(self, name: str, gpus: list[int] | tuple[int, ...]) -> tuple[int, ...]:
        free = self.free[name]
        pool = self.pool_of[name]
        label = self.label[name]
        del pool.buckets[len(free)][name]
        del pool.labeled[len(free)][label][name]
        wanted = set(gpus)
        self.free[name] = [g for g in free if g not in wanted]
        pool.buckets[len(self.free[name])][name] = None
        pool.labeled[len(self.free[name])].setdefault(label, {})[name] = None
        pool.free_total -= len(wanted)
        self.total_free -= len(wanted)
        return tuple(sorted(wanted))

    def give_back(self, name: str, gpus: list[int] | tuple[int, ...]) -> None:
        """Return GPUs taken earlier in the round (a reservation given up) to the index."""
        free = self.free[name]
        pool = self.pool_of[name]
        label = self.label[name]
        del pool.buckets[len(free)][name]
        del pool.labeled[len(free)][label][name]
        self.free[name] = sorted(set(free) | set(gpus))
        pool.buckets[len(self.free[name])][name] = None
        pool.labeled[len(self.free[name])].setdefault(label, {})[name] = None
        added = len(self.free[name]) - len(free)
        pool.free_total += added
        self.total_free += added

    # -- multi-node gangs -------------------------------------------------------------------

    def island_fit(self, groups: Pools, k: int, avoid: str = ""
                   ) -> list[tuple[str, int]] | None:
        """k free GPUs on nodes of one island, whole free nodes first, or None; without node
        `avoid` where they fit so.

        Among islands that can hold the gang, the one with the fewest whole free nodes
        wins, so big islands stay open for bigger gangs.
        """
        if avoid:
            return self._island_fit(groups, k, avoid) or self._island_fit(groups, k, "")
        return self._island_fit(groups, k, "")

    def _island_fit(self, groups: Pools, k: int, avoid: str) -> list[tuple[str, int]] | None:
        for group in groups:
            best: tuple[int, list[tuple[str, int]]] | None = None
            for pool in group:
                if pool.free_total < k or k <= pool.size:
                    continue
                plan = self._island_plan(pool, k, avoid)
                if plan is not None and (best is None or plan[0] < best[0]):
                    best = plan
            if best is not None:
                return best[1]
        return None

    def _island_plan(self, pool: Pool, k: int, avoid: str = ""
                     ) -> tuple[int, list[tuple[str, int]]] | None:
        """(whole free nodes, plan) of the island of the pool that holds k GPUs with the
        fewest whole free nodes, on nodes but `avoid`; nodes with the most free GPUs first,
        so the gang spans as few nodes as it can."""
        free: dict[str, list[tuple[int, str]]] = {}
        for c in range(pool.size, 0, -1):  # most free first
            for name in pool.buckets[c]:
                if name != avoid:
                    free.setdefault(self.node[name].island, []).append((c, name))
        best = None
        for _, nodes in sorted(free.items()):
            whole = sum(1 for c, _ in nodes if c == pool.size)
            if sum(c for c, _ in nodes) < k or (best is not None and whole >= best[0]):
                continue
            plan, need = [], k
            for c, name in nodes:
                take = min(c, need)
                plan.append((name, take))
                need -= take
                if not need:
                    break
            best = (whole, plan)
        return best

    def fits_now(self, groups: Pools, k: int, span: bool) -> bool:
        """Whether k GPUs are free now on one node or, with `span`, in one island."""
        return self.best_fit(groups, k) is not None or (
            span and self.island_fit(groups, k) is not None)

    def allocate(
        self, groups: Pools, k: int, level: int | None = None, avoid: str = ""
    ) -> tuple[Allocation, ...] | None:
        """Take a gang of k GPUs now (one node, or one island when k exceeds a node), on
        nodes but `avoid` where they fit so."""
        name = self.best_fit(groups, k, level)
        if name is not None and name == avoid:
            others = (n for n in self.candidates(groups, k, level or 0) if n != avoid)
            name = next(others, name)
        if name is not None:
            return (Allocation(name, self.take(name, k)),)
        plan = self.island_fit(groups, k, avoid)
        if plan is None:
            return None
        return tuple(Allocation(n, self.take(n, c)) for n, c in plan)

    def can_ever_fit(self, groups: Pools, k: int, span: bool = True) -> bool:
        """Whether some node, or (`span`) some island of one pool, can hold k GPUs when idle."""
        for group in groups:
            for pool in group:
                if k <= pool.size:
                    return True
                if not span:
                    continue
                islands: dict[str, int] = {}
                for name in pool.nodes:
                    isl = self.node[name].island
                    islands[isl] = islands.get(isl, 0) + self.node[name].total_gpus
                if max(islands.values(), default=0) >= k:
                    return True
        return False

