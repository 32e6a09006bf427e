"""Hypothesis strategies for the policy's properties: random fleets, running work, queues
and maintenance windows, and the settings the property tests share."""

from __future__ import annotations

import math
from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from policy_builders import NOW, job, node, running, snap, tiers

from jobs.policy.types import PolicyConfig, Snapshot

TIER_NAMES = ["enterprise", "paid", "free"]


@st.composite
def snapshots(draw) -> Snapshot:
    n_nodes = draw(st.integers(1, 6))
    nodes, runs, aid = [], [], 0
    for i in range(n_nodes):
        size = draw(st.sampled_from([8, 8, 4, 2, 1]))
        mode = draw(st.sampled_from(["idle", "idle", "full", "full", "some"]))
        busy = {"idle": [], "full": list(range(size))}.get(mode) or draw(
            st.lists(st.integers(0, size - 1), unique=True, max_size=size))
        until = draw(windows())
        nodes.append(node(f"n{i}", size, tuple(g for g in range(size) if g not in busy),
                          gpu_type=draw(st.sampled_from(["H100", "H100", "A100"])),
                          island=f"i{i // 3}", schedulable=draw(st.booleans()) or i < 4,
                          until=until, owner=draw(st.sampled_from(["", "", "", "a", "b"])),
                          # dedicated from its window on: its coming owner is not held to it
                          upcoming=draw(st.sampled_from(["", "a"])) if until else ""))
        # busy GPUs belong to running attempts of one to all of them
        while busy:
            take = draw(st.integers(1, len(busy)))
            gpus, busy = tuple(busy[:take]), busy[take:]
            runs.append(running(aid, {f"n{i}": gpus}, tier=draw(st.sampled_from(TIER_NAMES)),
                                org=draw(st.sampled_from("xyz")),
                                user=draw(st.sampled_from(["", "u"])),
                                ran=draw(st.sampled_from([5.0, 100.0, 3000.0])),
                                ends_in=draw(st.sampled_from([-60.0, 30.0, 500.0, 7200.0])),
                                preemptible=draw(st.booleans()),
                                preemptions=draw(st.integers(0, 4)),
                                **draw(checkpoints())))
            aid += 1
    queued = [
        job(j, tier=draw(st.sampled_from(TIER_NAMES + ["gold"])), org=draw(st.sampled_from("abc")),
            gpus=draw(st.sampled_from([1, 1, 2, 3, 4, 8, 12, 16, 16])),
            wait=draw(st.sampled_from([0.0, 20.0, 250.0, 20_000.0])),
            limit=draw(st.sampled_from([60.0, 600.0, 7200.0])),
            gpu_types=draw(st.sampled_from([(), ("H100",), ("A100", "H100")])),
            project=draw(st.sampled_from(["p", "q"])),
            user=draw(st.sampled_from(["", "u", "v"])),
            min_gpus=draw(st.sampled_from([None, 1])), checkpointable=draw(st.booleans()),
            preemptible=draw(st.sampled_from([True, True, False])))
        for j in range(draw(st.integers(0, 25)))
    ]
    cfg = PolicyConfig(min_runtime_before_preempt_s=draw(st.sampled_from([0.0, 60.0])),
                       hysteresis_s=draw(st.sampled_from([0.0, 60.0])),
                       preemption_budget_per_org=draw(st.integers(0, 4)),
                       backfill_depth=draw(st.sampled_from([1, 5, 2000])),
                       max_reservations=draw(st.integers(0, 3)),
                       # late and starving jobs take other paths through the ranking
                       late_fraction=draw(st.sampled_from([None, None, 1.0])),
                       starve_after_s=draw(st.sampled_from([43_200.0, 43_200.0, 200.0])),
                       window_run_s=draw(st.sampled_from([600.0, math.inf])))
    floors = {t: draw(st.sampled_from([0.0, 0.0, 0.2, 0.5])) for t in TIER_NAMES}
    caps = {"a": draw(st.integers(0, 8))} if draw(st.booleans()) else {}
    project_caps = {key: draw(st.integers(0, 8)) for key in [("a", "p"), ("b", "q")]
                    if draw(st.booleans())}
    user_caps = {key: draw(st.integers(0, 8)) for key in [("a", "u"), ("b", "v"), ("x", "u")]
                 if draw(st.booleans())}
    specs = tiers(**floors)
    if draw(st.booleans()):  # free shares paid's priority: the tiers go by weighted share
        specs["free"] = replace(specs["free"], priority=specs["paid"].priority)
    return snap(nodes, runs, queued, specs, cfg, org_gpu_caps=caps,
                project_gpu_caps=project_caps, user_gpu_caps=user_caps,
                project_weights={("a", "p"): draw(st.sampled_from([0.5, 1.0, 3.0]))},
                user_weights={("a", "u"): draw(st.sampled_from([0.5, 1.0, 3.0]))},
                usage={"a": draw(st.floats(0, 1e6)), "b": 0.0},
                user_usage={("a", "p", "u"): draw(st.floats(0, 1e6))},
                holds=draw(kept_reservations(queued, n_nodes)))


def windows() -> st.SearchStrategy[float | None]:
    """A node's maintenance window: none mostly, begun, or beginning before or after some
    of the drawn time limits end."""
    return st.sampled_from([None, None, None, NOW - 10.0, NOW + 300.0, NOW + 5000.0])


@st.composite
def checkpoints(draw) -> dict:
    """Whether an attempt checkpoints, its cadence if known, and its last checkpoint."""
    return {"checkpointable": draw(st.booleans()),
            "checkpoint_interval_s": draw(st.sampled_from([None, 30.0, 300.0])),
            "last_checkpoint_at": NOW - draw(st.sampled_from([1.0, 25.0, 280.0]))}


@st.composite
def kept_reservations(draw, queued, n_nodes: int) -> dict[int, dict[str, int]]:
    """Reservations of an earlier round, stale ones included: gone nodes, wrong sizes."""
    holds = {}
    for j in queued:
        if draw(st.booleans()):
            names = draw(st.lists(st.integers(0, n_nodes), min_size=1, max_size=3, unique=True))
            holds[j.job_id] = {f"n{i}": draw(st.sampled_from([1, 2, 4, 8])) for i in names}
    return holds


@st.composite
def big_gangs(draw) -> Snapshot:
    """Whole 8-GPU nodes in two islands, some busy, and gangs of 4 to 24 GPUs."""
    nodes, runs = [], []
    for i in range(draw(st.integers(2, 8))):
        busy = draw(st.booleans())
        nodes.append(node(f"n{i}", 8, () if busy else tuple(range(8)), island=f"i{i % 2}"))
        if busy:
            runs.append(running(i, {f"n{i}": tuple(range(8))}, tier="free",
                                ends_in=draw(st.sampled_from([30.0, 900.0]))))
    queued = [job(j, tier=draw(st.sampled_from(TIER_NAMES)), gpus=draw(st.sampled_from(
        [4, 8, 12, 16, 24])), wait=draw(st.sampled_from([0.0, 500.0]))) for j in range(6)]
    return snap(nodes, runs, queued)


@st.composite
def contention(draw) -> Snapshot:
    """A full fleet of attempts of every tier and flag, and late jobs of every tier."""
    nodes, runs, aid = [], [], 0
    for i in range(draw(st.integers(1, 5))):
        nodes.append(node(f"n{i}", 8, (), until=draw(windows())))
        cuts = sorted(draw(st.lists(st.integers(1, 7), unique=True, max_size=4)))
        for lo, hi in zip([0, *cuts], [*cuts, 8], strict=True):
            runs.append(running(aid, {f"n{i}": tuple(range(lo, hi))},
                                tier=draw(st.sampled_from(TIER_NAMES)),
                                org=draw(st.sampled_from("xy")),
                                ran=draw(st.sampled_from([5.0, 100.0, 3000.0])),
                                preemptible=draw(st.booleans()),
                                preemptions=draw(st.integers(0, 4)), **draw(checkpoints())))
            aid += 1
    queued = [job(j, tier=draw(st.sampled_from(TIER_NAMES)), org=draw(st.sampled_from("ab")),
                  gpus=draw(st.sampled_from([1, 2, 4, 8, 12, 16])), wait=draw(st.sampled_from(
                      [0.0, 400.0, 5000.0]))) for j in range(draw(st.integers(1, 8)))]
    cfg = PolicyConfig(preemption_budget_per_org=draw(st.integers(0, 3)))
    return snap(nodes, runs, queued, config=cfg,
                holds=draw(kept_reservations(queued, len(nodes))))


@st.composite
def island_contention(draw) -> Snapshot:
    """Busy nodes in two islands, one or two attempts a node, some gangs spanning two nodes,
    and late gangs larger than a node: the island preemption plans."""
    nodes = [node(f"n{i}", draw(st.sampled_from([8, 8, 8, 4])),
                  tuple(range(draw(st.sampled_from([0, 0, 2])))), island=f"i{i % 2}")
             for i in range(draw(st.integers(3, 6)))]
    allocs: list[dict[str, tuple[int, ...]]] = []
    for n in nodes:
        busy = tuple(g for g in range(n.total_gpus) if g not in n.free_gpus)
        if allocs and len(allocs[-1]) == 1 and draw(st.integers(0, 4)) == 0:
            allocs[-1][n.name] = busy  # the previous attempt spans this node too
            continue
        cut = draw(st.sampled_from([len(busy), len(busy), 1]))
        allocs += [{n.name: part} for part in (busy[:cut], busy[cut:]) if part]
    runs = [running(aid, alloc, tier=draw(st.sampled_from(["paid", "free", "free", "enterprise"])),
                    org=draw(st.sampled_from("xy")),
                    ran=draw(st.sampled_from([5.0, 100.0, 3000.0])),
                    preemptible=draw(st.sampled_from([True, True, True, False])),
                    preemptions=draw(st.sampled_from([0, 0, 1, 3])), **draw(checkpoints()))
            for aid, alloc in enumerate(allocs)]
    queued = [job(j, tier=draw(st.sampled_from(["enterprise", "paid"])),
                  org=draw(st.sampled_from("ab")), gpus=draw(st.sampled_from([8, 12, 16, 16, 24])),
                  wait=draw(st.sampled_from([20.0, 400.0, 400.0])))
              for j in range(draw(st.integers(1, 3)))]
    cfg = PolicyConfig(preemption_budget_per_org=draw(st.sampled_from([2, 16, 16])))
    floors = {t: draw(st.sampled_from([0.0, 0.0, 0.0, 0.1, 0.3])) for t in TIER_NAMES}
    return snap(nodes, runs, queued, tiers(**floors), cfg)


COMMON = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def idle_reserved(draw) -> Snapshot:
    """A late job that held node n0, partly free, last round, the other nodes full, and jobs
    of every tier behind it: the walk meets idle reserved GPUs with nothing else free, and
    jobs that might borrow them or take them over."""
    size = draw(st.sampled_from([2, 4]))
    nodes = [node("n0", size, tuple(range(draw(st.integers(1, size - 1)))))]
    runs = [running(0, {"n0": tuple(range(len(nodes[0].free_gpus), size))},
                    tier=draw(st.sampled_from(TIER_NAMES)),
                    ends_in=draw(st.sampled_from([500.0, 7200.0])))]
    for i in range(1, draw(st.integers(1, 3))):
        nodes.append(node(f"n{i}", size, ()))
        runs.append(running(i, {f"n{i}": tuple(range(size))},
                            tier=draw(st.sampled_from(TIER_NAMES)),
                            ends_in=draw(st.sampled_from([30.0, 500.0, 7200.0]))))
    holder = job(0, tier=draw(st.sampled_from(TIER_NAMES)), org="h", gpus=size, wait=4000.0)
    queued = [holder] + [
        job(j, tier=draw(st.sampled_from(TIER_NAMES)), org=draw(st.sampled_from("abc")),
            gpus=draw(st.sampled_from([1, 1, 2, 4])), wait=draw(st.sampled_from([0.0, 10.0])),
            limit=draw(st.sampled_from([60.0, 600.0, 7200.0])))
        for j in range(1, draw(st.integers(2, 8)))]
    cfg = PolicyConfig(max_reservations=draw(st.integers(1, 3)),
                       max_budget_reservations=draw(st.integers(1, 4)),
                       backfill_depth=draw(st.sampled_from([3, 2000])))
    floors = {t: draw(st.sampled_from([0.0, 0.0, 0.5])) for t in TIER_NAMES}
    return snap(nodes, runs, queued, tiers(**floors), cfg, holds={0: {"n0": size}})
