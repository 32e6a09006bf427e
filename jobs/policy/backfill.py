"""Reservations for blocked jobs, and backfill on their idle GPUs.

When a job ranked ahead cannot start, it gets the earliest GPUs it can have: each node's
release times come from running attempts' `expected_end` (and from this round's placements);
the node where the gang's k-th GPU frees up first wins. Those GPUs are reserved: the ones
free now leave the free index, so a later job can only start on them if it ends before the
reservation starts: by its estimate on a reservation made this round (as EASY++ does), by
its time limit on one kept from an earlier round (`Hold.kept`), which backfill then cannot
delay. Several reservations may exist in one round (`PolicyConfig.max_reservations`); each
reserved node belongs to one of them.

Per (pool, k) a lazy min-heap of "earliest time this node has k GPUs" is built on first use;
placements only push a node's time later, so a stale entry is recomputed when it reaches
the top and pushed back. Finding a reservation costs a few heap operations, not a fleet scan.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field

from .placement import FreeIndex
from .pools import Pool, Pools, pool_ids
from .types import Allocation, RunningView


@dataclass(slots=True, eq=False)
class Hold:
    """One reservation: GPUs per node, the part of them free now, and when it starts."""

    job_id: int
    start_at: float
    gpus: dict[str, tuple[int, ...]]
    free_now: dict[str, list[int]] = field(default_factory=dict)
    level: int = 0  # tier level of the job it is for: higher tiers may take it over
    # kept from an earlier round (kept.py): a borrower must end by its time limit, not by its
    # estimate, so that running over cannot push back a start already promised
    kept: bool = False

    def allocations(self) -> tuple[Allocation, ...]:
        return tuple(Allocation(n, g) for n, g in self.gpus.items())


class Timeline:
    """When each GPU of each schedulable node is expected to be free."""

    def __init__(self, now: float, running: list[RunningView], index: FreeIndex) -> None:
        self.now, self.index = now, index
        # node -> [(end time, GPU indices)]: what frees up, and when
        self.releases: dict[str, list[tuple[float, tuple[int, ...]]]] = defaultdict(list)
        self.version: dict[str, int] = defaultdict(int)
        self.reserved: set[str] = set()
        self.hold_of: dict[str, Hold] = {}  # reserved node -> its reservation
        self.holds: list[Hold] = []
        self.idle_reserved = 0  # reserved GPUs that are free now, over all holds
        # reservations with idle GPUs: latest start of those made this round and of those
        # kept, lowest tier level (None: stale)
        self._idle: tuple[float, float, int] | None = None
        self._heaps: dict[tuple[int, int], list[tuple[float, int, str]]] = {}
        self._profiles: dict[str, tuple[int, list[float]]] = {}
        for run in running:
            end = max(run.predicted_end(now), now)
            for a in run.allocations:
                if a.node in index.node:
                    self.releases[a.node].append((end, a.gpus))

    def occupy(self, node: str, gpus: tuple[int, ...], end: float) -> None:
        """GPUs taken this round, free again at `end`."""
        self.releases[node].append((max(end, self.now), gpus))
        self.version[node] += 1

    def release_early(self, run: RunningView, at: float, taken: dict[str, set[int]]) -> None:
        """A preempted attempt's GPUs free up at `at`, except those handed to the preemptor."""
        for a in run.allocations:
            rel = self.releases.get(a.node)
            if rel is None:
                continue
            kept = [r for r in rel if r[1] != a.gpus]
            rest = tuple(g for g in a.gpus if g not in taken.get(a.node, ()))
            if rest:
                kept.append((at, rest))
            self.releases[a.node] = kept
            self.version[a.node] += 1

    # -- earliest start ---------------------------------------------------------------------

    def _node_time(self, node: str, k: int) -> tuple[float, list[int]]:
        """Earliest time node has k GPUs (inf if never) and which GPUs those are."""
        gpus = list(self.index.free[node])
        if len(gpus) >= k:
            return self.now, gpus[:k]
        for end, released in sorted(self.releases.get(node, ())):
            gpus.extend(released)
            if len(gpus) >= k:
                return end, gpus[:k]
        return float("inf"), []

    def profile(self, node: str) -> list[float]:
        """When each of the node's GPUs is free, earliest first (cached per node version)."""
        ver = self.version[node]
        cached = self._profiles.get(node)
        if cached is None or cached[0] != ver:
            times = [self.now] * len(self.index.free[node])
            for end, released in sorted(self.releases.get(node, ())):
                times.extend([end] * len(released))
            cached = self._profiles[node] = (ver, times)
        return cached[1]

    def time_k(self, node: str, k: int) -> float:
        """Earliest time the node has k GPUs."""
        times = self.profile(node)
        return times[k - 1] if k <= len(times) else float("inf")

    def _heap(self, pool: Pool, k: int) -> list[tuple[float, int, str]]:
        key = (id(pool), k)
        heap = self._heaps.get(key)
        if heap is None:
            heap = []
            for node in pool.nodes:
                if node not in self.reserved:
                    heap.append((self.time_k(node, k), self.version[node], node))
            heapq.heapify(heap)
            self._heaps[key] = heap
        return heap

    def _peek(self, pool: Pool, k: int) -> tuple[float, str] | None:
        heap = self._heap(pool, k)
        while heap:
            t, ver, node = heap[0]
            if node in self.reserved:
                heapq.heappop(heap)
            elif ver != self.version[node]:
                heapq.heapreplace(heap, (self.time_k(node, k), self.version[node], node))
            else:
                return t, node
        return None

    def earliest(self, groups: Pools, k: int) -> tuple[float, str] | None:
        """Earliest (time, node) a single node of the allowed pools holds k GPUs."""
        best = None
        for group in groups:
            for pool in group:
                if k > pool.size or pool.until is not None:  # no later start before a window
                    continue
                found = self._peek(pool, k)
                if found is None or found[0] == float("inf"):
                    continue
                if best is None or found[0] < best[0]:
                    best = found
        return best

    def earliest_island(self, groups: Pools, k: int) -> tuple[float, dict[str, int]] | None:
        """Earliest time nodes of one island hold a gang larger than a node, and the plan:
        the nodes with the most GPUs free by then, as the gang would be placed.

        Rare and small (a few big gangs), so this one scans the pool's nodes.
        """
        best = None
        for group in groups:
            for pool in group:
                if k <= pool.size or pool.until is not None:
                    continue
                by_island: dict[str, list[str]] = defaultdict(list)
                for node in pool.nodes:
                    if node not in self.reserved:
                        by_island[self.index.node[node].island].append(node)
                for nodes in by_island.values():
                    profiles = [self.profile(n) for n in nodes]  # each sorted
                    # an island whose k-th GPU frees no sooner than the best cannot win:
                    # counting the earlier ones per node spares sorting all its GPUs
                    if best is not None and sum(
                            bisect_left(p, best[0]) for p in profiles) < k:
                        continue
                    times = sorted([t for p in profiles for t in p])
                    if len(times) < k or times[k - 1] == math.inf:
                        continue
                    t = times[k - 1]
                    if best is None or t < best[0]:
                        best = (t, self._island_plan(nodes, k, t))
        return best

    def _island_plan(self, nodes: list[str], k: int, t: float) -> dict[str, int]:
        ready = sorted(((bisect_right(self.profile(n), t), n) for n in nodes), reverse=True)
        plan, need = {}, k
        for count, node in ready:
            take = min(count, need)
            if take:
                plan[node] = take
                need -= take
            if not need:
                break
        return plan

    # -- reserving --------------------------------------------------------------------------

    def reserve(self, job_id: int, start_at: float, plan: dict[str, int], level: int = 0,
                kept: bool = False) -> Hold:
        """Hold GPUs on the planned nodes; the free ones leave the free index."""
        hold = Hold(job_id, start_at, {}, level=level, kept=kept)
        idle = False
        for node, k in plan.items():
            gpus = self._node_time(node, k)[1]
            hold.gpus[node] = tuple(sorted(gpus))
            free_now = [g for g in gpus if g in set(self.index.free[node])]
            if free_now:
                self.index.take_exact(node, free_now)
                self.idle_reserved += len(free_now)
                # the node's profile counted these as free: a take-over adds them back itself
                self.version[node] += 1
                idle = True
            hold.free_now[node] = free_now
            self.reserved.add(node)
            self.hold_of[node] = hold
        self.holds.append(hold)
        if idle and self._idle is not None:  # kept up to date: a round makes dozens
            fresh, old, low = self._idle
            fresh, old = (fresh, max(old, start_at)) if kept else (max(fresh, start_at), old)
            self._idle = (fresh, old, min(low, level))
        return hold

    def cancel(self, hold: Hold) -> None:
        """Give a reservation up: its idle GPUs return to the free index, its nodes to the heaps."""
        self.holds.remove(hold)
        self._idle = None
        for node, idle in hold.free_now.items():
            if idle:
                self.index.give_back(node, idle)
                self.idle_reserved -= len(idle)
            self.reserved.discard(node)
            self.hold_of.pop(node, None)
            self.version[node] += 1
            pool = id(self.index.pool_of[node])
            for (pid, k), heap in self._heaps.items():
                if pid == pool:
                    heapq.heappush(heap, (self.time_k(node, k), self.version[node], node))
        hold.free_now = {}

    def time_k_taking(self, node: str, k: int) -> float:
        """Earliest time the node has k GPUs if its reservation were given up."""
        hold = self.hold_of.get(node)
        idle = len(hold.free_now.get(node, ())) if hold is not None else 0
        return self.now if idle >= k else self.time_k(node, k - idle)

    def _idle_holds(self) -> tuple[float, float, int]:
        """Of the reservations with idle GPUs: the latest start of those made this round and
        of those kept (a job ending later borrows nothing), and the lowest tier level."""
        if self._idle is None:
            idle = [h for h in self.holds if any(h.free_now.values())]
            self._idle = (max((h.start_at for h in idle if not h.kept), default=-math.inf),
                          max((h.start_at for h in idle if h.kept), default=-math.inf),
                          min((h.level for h in idle), default=1 << 30))
        return self._idle

    def may_lend(self, shortest_limit: float) -> bool:
        """Whether some job could still borrow idle reserved GPUs: one made this round lends
        by estimates (no lower bound), a kept one only to a job whose time limit, at least
        `shortest_limit`, ends before it starts."""
        if not self.idle_reserved:
            return False
        fresh, kept, _ = self._idle_holds()
        return fresh > self.now or kept >= self.now + shortest_limit

    def lowest_idle_level(self) -> int:
        """The lowest tier level of a reservation with idle GPUs (a higher one may take it)."""
        return self._idle_holds()[2] if self.idle_reserved else 1 << 30

    def borrow(self, groups: Pools, k: int, ends_at: float, limit_at: float) -> Allocation | None:
        """Start a job on reserved-but-idle GPUs when it ends before the reservation starts:
        by its predicted end (`ends_at`), or by its time limit (`limit_at`) for a kept one.

        Only single-node gangs borrow. The node's unreserved free GPUs are used first; the
        caller records the occupancy.
        """
        if not self.idle_reserved or ends_at > max(self._idle_holds()[:2]):
            return None
        allowed = pool_ids(groups)
        for hold in self.holds:
            if (limit_at if hold.kept else ends_at) > hold.start_at:
                continue
            for node, idle in hold.free_now.items():
                if id(self.index.pool_of[node]) not in allowed:
                    continue
                unreserved = self.index.free[node]
                if len(unreserved) + len(idle) < k:
                    continue
                own = unreserved[:k]
                if own:
                    self.index.take_exact(node, own)
                lent = idle[: k - len(own)]
                hold.free_now[node] = idle[len(lent) :]
                self._idle = None
                self.idle_reserved -= len(lent)
                return Allocation(node, tuple(sorted(own + lent)))
        return None
