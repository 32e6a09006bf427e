"""Victim choice for preemption.

A running attempt can be a victim only when its tier and the job itself are preemptible, it
has run at least `min_runtime_before_preempt_s`, the job was preempted fewer times than its
tier's `max_preemptions`, and it is not expected to end within `spare_ending_within_s`
(that also skips attempts already in their grace, which the snapshot shows ending then).
The preemptor must be of a strictly higher tier, and a victim's tier is never pushed below
its own floor.

A victim costs the work it loses, weighted so that jobs preempted before and jobs about to
finish are spared:

    lost  = gpus * (now - last checkpoint, or start when none) + gpus * restart_cost_s
    near  = lost * max(0, near_finish_s - (predicted end - now)) / near_finish_s
    cost  = (lost + near) * (1 + preemptions)

On each candidate node the cheapest victims are taken until the gang fits; the node with the
lowest total wins (the first GPU type in the job's preference order that has any plan).
Candidate nodes are tried cheapest-victim first and at most `preempt_scan_nodes` of them per
GPU type, which bounds the cost of one search on a large fleet.
A gang larger than a node takes any GPUs of one island, as it is placed (placement.py): the
cheapest victims whose GPUs there, with the island's free ones, make the gang
(`island_plan`); the cheapest island wins.
A victim's whole gang goes, even the GPUs on other nodes: a gang is never split.

A plan may cost at most `loss_bound`: a multiple of the GPU-time the preemptor would wait
for its natural start, so that no kill loses far more work than it saves waiting.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from .placement import FreeIndex
from .pools import Pools, largest_node
from .types import PolicyConfig, QueuedJob, RunningView, TierSpec

_INF = float("inf")


@dataclass(slots=True, eq=False)
class Victim:
    run: RunningView
    level: int
    cost: float
    gpus: int
    on_node: dict[str, list[int]]  # its GPUs per node
    gone: bool = False

    def gpus_on(self, node: str) -> list[int]:
        return self.on_node.get(node, [])


def victim_cost(run: RunningView, gpus: int, now: float, cfg: PolicyConfig) -> float:
    since = run.started_at
    if run.checkpointable and run.last_checkpoint_at is not None:
        since = max(since, run.last_checkpoint_at)
    lost = gpus * (max(0.0, now - since) + cfg.restart_cost_s)
    # a job close to its end would give its GPUs back soon: sparing it costs little waiting,
    # killing it loses what it did; weigh the part of the window it is inside, by its work
    left = run.predicted_end(now) - now
    near = lost * max(0.0, cfg.near_finish_s - left) / cfg.near_finish_s if cfg.near_finish_s else 0
    return (lost + near) * (1 + run.preemptions)


def loss_bound(cfg: PolicyConfig, slo_s: float, job: QueuedJob, natural: float, now: float,
               first: bool) -> float:
    """Most a plan may cost (victim cost) for `job`, whose GPUs free up by `natural`.

    After the round's first kill: `preempt_loss_ratio` x GPUs x the wait, so a burst of
    preemptors does not kill long-running work to save short waits. The first kill:
    `first_kill_loss_ratio` x GPUs x the wait, but only while waiting would start the job
    at most `first_kill_bound_slos` start SLOs after its deadline; past that, the tier's
    promise weighs more than the work, and the kill goes ahead whatever it costs.
    """
    wait = natural - now
    if not first:
        return cfg.preempt_loss_ratio * job.gpus * wait
    late_by = natural - (job.enqueued_at + slo_s)
    if cfg.first_kill_loss_ratio is None or late_by > cfg.first_kill_bound_slos * slo_s:
        return _INF
    return cfg.first_kill_loss_ratio * job.gpus * wait


def grace_s(run: RunningView, now: float, cfg: PolicyConfig, slack: float) -> float:
    """Time the victim gets to save its work before it is killed.

    `slack` is how long the preemptor can still wait for its start SLO. A victim with a
    known checkpoint cadence gets the time to its next checkpoint if that fits in the cap
    and the slack; if not, it is stopped at once, since waiting without reaching a
    checkpoint saves nothing and makes the preemptor miss its SLO. A checkpointable victim
    of unknown cadence checkpoints when signalled: it gets the cap, within the slack, but at
    least `signal_grace_s`, since a few seconds may save hours of a long job's work.
    Nothing to save means no grace.
    """
    if not run.checkpointable:
        return 0.0
    limit = min(cfg.preempt_grace_max_s, max(0.0, slack))
    interval = run.checkpoint_interval_s
    if not interval:
        return max(limit, min(cfg.signal_grace_s, cfg.preempt_grace_max_s))
    last = run.last_checkpoint_at if run.last_checkpoint_at is not None else run.started_at
    to_next = max(0.0, last + interval - now)
    return to_next if to_next <= limit else 0.0


def eligible(run: RunningView, tier: TierSpec | None, now: float, cfg: PolicyConfig) -> bool:
    return (
        tier is not None
        and tier.preemptible
        and run.preemptible
        and now - run.started_at >= cfg.min_runtime_before_preempt_s
        and run.preemptions < tier.max_preemptions
        # ends soon anyway (or is already being stopped): not worth a kill
        and run.predicted_end(now) - now > cfg.spare_ending_within_s
    )


@dataclass(slots=True)
class Plan:
    parts: dict[str, int]  # node -> GPUs the preemptor takes there
    victims: list[Victim]
    cost: float


class VictimIndex:
    """Eligible victims by node, cheapest first, and the nodes of each pool that have any."""

    def __init__(
        self,
        running: list[RunningView],
        tiers: dict[str, TierSpec],
        levels: dict[str, int],
        index: FreeIndex,
        now: float,
        cfg: PolicyConfig,
    ) -> None:
        self.index = index
        self.scan_nodes = cfg.preempt_scan_nodes
        self.by_node: dict[str, list[Victim]] = defaultdict(list)
        self.by_pool: dict[int, list[str]] = defaultdict(list)
        self.min_level = 1 << 30
        by_node, known = self.by_node, index.node
        for run in running:
            if not eligible(run, tiers.get(run.tier), now, cfg):
                continue
            allocs = run.allocations
            if len(allocs) == 1:  # the common case: one node
                on_node = {allocs[0].node: list(allocs[0].gpus)}
            else:
                on_node = defaultdict(list)
                for a in allocs:
                    on_node[a.node].extend(a.gpus)
            gpus = sum(map(len, on_node.values()))
            v = Victim(run, levels[run.tier], victim_cost(run, gpus, now, cfg), gpus, on_node)
            if v.level < self.min_level:
                self.min_level = v.level
            for node in on_node:
                if node in known:
                    by_node[node].append(v)
        for node, victims in self.by_node.items():
            victims.sort(key=lambda v: v.cost)
            self.by_pool[id(index.pool_of[node])].append(node)
        self._below: dict[tuple[int, int], tuple[list[str], dict[str, list[Victim]]]] = {}

    def _candidates(self, pool_id: int, level: int) -> tuple[list[str], dict[str, list[Victim]]]:
        """Nodes of a pool with victims below `level`, by their cheapest such victim (cached).

        Sorted so that plan() can stop at the first node whose cheapest victim already costs
        more than the best plan found.
        """
        key = (pool_id, level)
        found = self._below.get(key)
        if found is None:
            lists = {}
            for node in self.by_pool.get(pool_id, ()):
                below = [v for v in self.by_node[node] if v.level < level]
                if below:
                    lists[node] = below
            nodes = sorted(lists, key=lambda n: lists[n][0].cost)
            found = self._below[key] = (nodes, lists)
        return found

    def plan(
        self,
        groups: Pools,
        k: int,
        level: int,
        skip_nodes: set[str],
        room: Mapping[str, float],
        budget: int,
        max_cost: float = _INF,
        extra_free: dict[str, int] | None = None,
    ) -> Plan | None:
        """Cheapest plan for a k-GPU gang of tier level `level`, or None.

        `room` is, per tier, how many GPUs it may lose before dropping below its floor;
        `budget` how many victims the preemptor's org may still take this round; a plan
        costing more than `max_cost` is not worth it; `extra_free` counts GPUs per node that
        are not in the free index but are the preemptor's to take (a lower tier's reservation).
        A gang larger than every allowed node is planned on the nodes of one island.
        """
        if level <= self.min_level or budget <= 0:
            return None
        extra = extra_free or {}
        if k > largest_node(groups):
            return self._plan_island(groups, k, level, skip_nodes, room, budget, max_cost, extra)
        return self._plan_node(groups, k, level, skip_nodes, room, budget, max_cost, extra)

    def _plan_node(self, groups: Pools, k: int, level: int, skip_nodes: set[str],
                   room: Mapping[str, float], budget: int, max_cost: float,
                   extra: dict[str, int]) -> Plan | None:
        for group in groups:
            best: Plan | None = None
            scanned = 0
            for pool in group:
                if k > pool.size or pool.until is not None:  # no kill before a maintenance
                    continue
                nodes, lists = self._candidates(id(pool), level)
                for node in nodes:
                    scanned += 1
                    if scanned > self.scan_nodes:
                        break
                    victims = lists[node]
                    # a plan costs at least its node's cheapest victim: nothing later can win
                    if best is not None and victims[0].cost >= best.cost:
                        break
                    if node in skip_nodes:
                        continue
                    have = len(self.index.free[node]) + extra.get(node, 0)
                    plan = node_plan(node, victims, k, room, budget, have)
                    if plan is not None and plan.cost > max_cost:
                        plan = None
                    if plan is not None and (best is None or plan.cost < best.cost):
                        best = plan
            if best is not None:
                return best
        return None

    def _plan_island(self, groups: Pools, k: int, level: int, skip_nodes: set[str],
                     room: Mapping[str, float], budget: int, max_cost: float,
                     extra: dict[str, int]) -> Plan | None:
        # rare (a few big gangs) and bounded by the round's preemptor limit: scans the pool
        for group in groups:
            best: Plan | None = None
            for pool in group:
                if k <= pool.size or pool.until is not None:
                    continue
                lists = self._candidates(id(pool), level)[1]
                islands: dict[str, list[str]] = defaultdict(list)
                for node in pool.nodes:
                    if node not in skip_nodes:
                        islands[self.index.node[node].island].append(node)
                free = self.index.free
                for nodes in islands.values():
                    have = {n: len(free[n]) + extra.get(n, 0) for n in nodes}
                    plan = island_plan(nodes, k, lists, have, room, budget)
                    if plan is not None and plan.cost <= max_cost and (
                            best is None or plan.cost < best.cost):
                        best = plan
            if best is not None:
                return best
        return None


def node_plan(node: str, victims: list[Victim], k: int, room: Mapping[str, float], budget: int,
              have: int) -> Plan | None:
    """The cheapest victims on a node until it has k GPUs, within the floors and the budget."""
    taken: list[Victim] = []
    lost: dict[str, int] = defaultdict(int)
    cost = 0.0
    for v in victims:
        if have >= k or len(taken) >= budget:
            break
        here = v.on_node.get(node)
        if v.gone or not here:
            continue
        tier = v.run.tier
        if lost[tier] + v.gpus > room.get(tier, 0.0):
            continue
        lost[tier] += v.gpus
        taken.append(v)
        cost += v.cost
        have += len(here)
    return Plan({node: k}, taken, cost) if have >= k and taken else None


def island_plan(nodes: list[str], k: int, lists: dict[str, list[Victim]],
                have: dict[str, int], room: Mapping[str, float], budget: int) -> Plan | None:
    """The cheapest victims whose GPUs on these nodes, with the nodes' free ones (`have`),
    make k; the gang then takes the nodes with the most GPUs first, as it would be placed.

    A min-cost cover: victims by cost per GPU freed here, and at each step the plan that
    stops with the cheapest single victim covering what is left is kept if cheaper (greedy
    by ratio alone would stop a big gang where one small job was enough); victims a
    cheaper set made redundant are then spared, dearest first. None when the free GPUs
    suffice (nothing to stop) or no plan fits the floors and the budget.
    """
    need = k - sum(have.values())
    if need <= 0:
        return None
    here = set(nodes)
    freed: dict[int, int] = {}
    found: dict[int, Victim] = {}
    for node in nodes:
        for v in lists.get(node, ()):
            if not v.gone and id(v) not in found:
                found[id(v)] = v
                freed[id(v)] = sum(len(g) for n, g in v.on_node.items() if n in here)
    order = sorted(found.values(), key=lambda v: (v.cost / freed[id(v)], v.cost))
    taken = _cover(order, need, freed, room, budget)
    if taken is None:
        return None
    taken = _spare_redundant(taken, need, freed)
    avail = dict(have)
    for v in taken:
        for n, g in v.on_node.items():
            if n in here:
                avail[n] += len(g)
    parts, left = {}, k
    for node in sorted(nodes, key=lambda n: (-avail[n], n)):
        take = min(avail[node], left)
        if take:
            parts[node] = take
            left -= take
        if not left:
            break
    return Plan(parts, taken, sum(v.cost for v in taken))


def _cover(order: list[Victim], need: int, freed: dict[int, int], room: Mapping[str, float],
           budget: int) -> list[Victim] | None:
    lost: dict[str, int] = defaultdict(int)
    taken: list[Victim] = []
    best: tuple[float, list[Victim]] | None = None
    cost, covered = 0.0, 0

    def fits(v: Victim) -> bool:
        return len(taken) < budget and lost[v.run.tier] + v.gpus <= room.get(v.run.tier, 0.0)

    for i, v in enumerate(order):
        if best is not None and cost >= best[0]:
            break  # the prefix alone costs more than a plan found
        finisher = min((w for w in order[i:] if freed[id(w)] >= need - covered and fits(w)),
                       key=lambda w: w.cost, default=None)
        if finisher is not None and (best is None or cost + finisher.cost < best[0]):
            best = (cost + finisher.cost, [*taken, finisher])
        if not fits(v):
            continue
        taken.append(v)
        lost[v.run.tier] += v.gpus
        cost += v.cost
        covered += freed[id(v)]
        if covered >= need:
            if best is None or cost < best[0]:
                best = (cost, list(taken))
            break
    return best[1] if best is not None else None


def _spare_redundant(taken: list[Victim], need: int, freed: dict[int, int]) -> list[Victim]:
    covered = sum(freed[id(v)] for v in taken)
    kept = list(taken)
    for v in sorted(taken, key=lambda v: -v.cost):
        if covered - freed[id(v)] >= need:
            kept.remove(v)
            covered -= freed[id(v)]
    return kept
