"""Time one scheduling decision of the gpusched policy on a large synthetic fleet.

    python bench/policy_tick.py [--runs 7] [--queued 5000,50000,200000] [--late-gangs 0]

Builds (seeded) 1,000 nodes x 8 GPUs of mixed types in islands of 16, 5,000 running
attempts and N queued jobs of three tiers and 300 orgs (by virtual deadline, as the tick
loads them), carries the reservations of a first decision into the snapshot (as the tick does
between rounds), then times `decide` (median and p90 of several runs, one process, one
core) and `fifo_decide` on the same snapshot with the queue in arrival order, the two
alternated run by run.
The header says whether the policy ran compiled (bin/build-policy) or interpreted.
Target: median <= 100 ms at 50,000 queued. `--late-gangs N` adds N enterprise gangs of 16
GPUs, larger than any node, waiting an hour: each may search every island for victims.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from sys import intern

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.policy import decide, fifo_decide  # noqa: E402
from jobs.policy.deadlines import in_deadline_order  # noqa: E402
from jobs.policy.types import (  # noqa: E402
    Allocation,
    NodeView,
    PolicyConfig,
    QueuedJob,
    RunningView,
    Snapshot,
    TierSpec,
)
from jobs.policy_build import running_compiled  # noqa: E402

NOW = 1_700_000_000.0
TYPES = [("H100", 0.4, 81_920), ("A100", 0.3, 81_920), ("L40S", 0.2, 46_080),
         ("H200", 0.1, 143_360)]
TIERS = {
    "enterprise": TierSpec("enterprise", 3, 4.0, 0.2, 1.0, 30.0, preemptible=False),
    "paid": TierSpec("paid", 2, 2.0, 0.4, 1.0, 300.0, preemptible=True),
    "free": TierSpec("free", 1, 1.0, 0.1, 1.0, 3600.0, preemptible=True),
}


def _nodes(rng: random.Random, count: int = 1000, size: int = 8) -> list[NodeView]:
    nodes, i = [], 0
    for gtype, frac, mem in TYPES:
        for _ in range(round(count * frac)):
            region = "eu" if i % 10 == 0 else "us"
            nodes.append(NodeView(f"n{i:04d}", gtype, mem, size, tuple(range(size)), region,
                                  f"isl{i // 16}"))
            i += 1
    return nodes


def _orgs(rng: random.Random, count: int = 300) -> list[tuple[str, str]]:
    tiers = rng.choices(["enterprise", "paid", "free"], [0.15, 0.45, 0.4], k=count)
    return [(f"org{i}", t) for i, t in enumerate(tiers)]


def _running(rng, nodes, orgs, count=5000) -> tuple[list[RunningView], list[NodeView]]:
    free = {n.name: list(n.free_gpus) for n in nodes}
    names = [n.name for n in nodes]
    out = []
    for a in range(count):
        gpus = rng.choices([1, 2, 4, 8], [0.78, 0.13, 0.06, 0.03])[0]
        for _ in range(20):
            node = rng.choice(names)
            if len(free[node]) >= gpus:
                break
        else:
            continue
        taken, free[node] = free[node][:gpus], free[node][gpus:]
        org, tier = rng.choice(orgs)
        start = NOW - rng.uniform(30, 4 * 3600)
        end = NOW + rng.uniform(10, 3 * 3600)
        ckpt = start + rng.uniform(0, NOW - start) if rng.random() < 0.6 else None
        out.append(RunningView(a, 10_000_000 + a, org, tier, (Allocation(node, tuple(taken)),),
                               start, end, end + 600, ckpt, ckpt is not None,
                               preemptions=rng.choice([0, 0, 0, 1, 3]),
                               project=intern(f"p{a % 3}"), user=intern(f"u{a % 7}")))
    views = [NodeView(n.name, n.gpu_type, n.gpu_memory_mb, n.total_gpus, tuple(free[n.name]),
                      n.region, n.island) for n in nodes]
    return out, views


def _queued(rng: random.Random, orgs, count: int) -> list[QueuedJob]:
    """Names interned, as the tick's loader hands them (jobs/scheduler/snapshot.py)."""
    out = []
    waits = sorted((rng.uniform(0, 6 * 3600) for _ in range(count)), reverse=True)
    prefs = [(), (), ("H100", "H200"), ("A100",), ("L40S", "A100"), ("H200",)]
    for j in range(count):
        org, tier = orgs[min(int(rng.paretovariate(1.2)) - 1, len(orgs) - 1)] \
            if rng.random() < 0.5 else rng.choice(orgs)
        gpus = rng.choices([1, 2, 4, 8, 16], [0.6, 0.2, 0.12, 0.07, 0.01])[0]
        limit = rng.choice([600.0, 1800.0, 3600.0, 4 * 3600.0])
        out.append(QueuedJob(j, org, tier, gpus, NOW - waits[j], limit,
                             limit * rng.uniform(0.2, 0.9), rng.choice(prefs),
                             90_000 if rng.random() < 0.03 else 0,
                             "eu" if rng.random() < 0.05 else "", intern(f"p{j % 4}"),
                             intern(f"u{j % 7}"),
                             min_gpus=1 if gpus > 1 and rng.random() < 0.2 else None))
    return out


def _built(jobs: list[QueuedJob]) -> list[QueuedJob]:
    """Each job built in this order as a loader builds it from rows read oldest first: the
    start times were computed in arrival order, the time limit (an integer column) and the
    estimate (JSON text) become floats as the job is built."""
    return [replace(j, time_limit_s=float(int(j.time_limit_s)),
                    expected_duration_s=None if j.expected_duration_s is None
                    else float(repr(j.expected_duration_s)))
            for j in jobs]


def _tick_order(jobs: list[QueuedJob]) -> list[QueuedJob]:
    """The queue as the tick loads it (jobs/scheduler/snapshot.py: load_queued): by virtual
    deadline, built in that order."""
    return _built(in_deadline_order(jobs, PolicyConfig().limit_weight))


def _dedicate(nodes: list[NodeView], orgs, count: int) -> list[NodeView]:
    """`count` nodes spread over the GPU types, dedicated 8 at a time to enterprise
    organizations (docs/nodes.md, "Dedicated nodes"): every job's matching then depends on
    its organization too."""
    if not count:
        return nodes
    owners = [o for o, tier in orgs if tier == "enterprise"][:max(1, count // 8)]
    step = max(1, len(nodes) // count)
    chosen = {n.name: owners[i // 8 % len(owners)]
              for i, n in enumerate(nodes[::step][:count])}
    return [replace(n, owner=chosen.get(n.name, "")) for n in nodes]


def snapshot(queued: int, seed: int = 7, late_gangs: int = 0, dedicated: int = 0) -> Snapshot:
    rng = random.Random(seed)
    nodes = _nodes(rng)
    orgs = _orgs(rng)
    running, nodes = _running(rng, nodes, orgs)
    nodes = _dedicate(nodes, orgs, dedicated)
    usage = {o: rng.uniform(0, 5e6) for o, _ in orgs}
    caps = {o: 64 for o, _ in orgs[::10]}
    late = [QueuedJob(queued + i, f"late{i}", "enterprise", 16, NOW - 3600, 3600.0)
            for i in range(late_gangs)]
    return Snapshot(NOW, nodes, running, _tick_order(late + _queued(rng, orgs, queued)),
                    dict(TIERS), usage,
                    org_weights={o: 2.0 for o, _ in orgs[::7]}, org_gpu_caps=caps,
                    queue_sorted=True)


def _time(calls, runs: int) -> tuple[list[list[float]], list[object]]:
    """Milliseconds of each (function, snapshot) over `runs` runs, alternated so that a
    machine that speeds up or slows down during the measure does not bias the ratio."""
    times: list[list[float]] = [[] for _ in calls]
    results: list[object] = [None] * len(calls)
    for _ in range(runs):
        for i, (fn, snap) in enumerate(calls):
            gc.collect()
            t0 = time.perf_counter()
            results[i] = fn(snap)
            times[i].append((time.perf_counter() - t0) * 1000)
    return times, results


def _arrival_order(snap: Snapshot) -> Snapshot:
    """The same snapshot with the queue oldest first, built in that order: what a FIFO
    consumer is handed (fifo sorts by arrival itself, and should not be timed sorting
    gpusched's order, nor reading jobs laid out in it)."""
    oldest_first = sorted(snap.queued, key=lambda j: (j.enqueued_at, j.job_id))
    return replace(snap, queued=_built(oldest_first), queue_sorted=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--queued", default="5000,50000,200000")
    ap.add_argument("--late-gangs", type=int, default=0)
    ap.add_argument("--dedicated", type=int, default=0,
                    help="nodes dedicated to enterprise organizations, 8 to each")
    args = ap.parse_args()
    head = f"{'queued':>8} {'median ms':>10} {'p90 ms':>8} {'fifo ms':>8} {'ratio':>6} " \
           f"{'placed':>7} {'preempt':>7} {'reserv':>6} {'kept':>5} {'pending':>8}"
    built = "compiled (bin/build-policy)" if running_compiled() else "interpreted"
    mine = f", {args.dedicated} nodes dedicated" if args.dedicated else ""
    print(f"gpusched decide: 1,000 nodes x 8 GPUs{mine}, 5,000 running, one core; policy "
          f"{built}")
    print(head)
    for q in (int(x) for x in args.queued.split(",")):
        snap = snapshot(q, late_gangs=args.late_gangs, dedicated=args.dedicated)
        # steady state: the tick carries the previous round's reservations into this one
        snap.holds = decide(snap).next_holds()
        runs = max(3, args.runs if q <= 50_000 else args.runs // 2)
        (ours, base), (d, _) = _time([(decide, snap), (fifo_decide, _arrival_order(snap))], runs)
        ours.sort()
        med, p90 = statistics.median(ours), ours[min(len(ours) - 1, int(0.9 * len(ours)))]
        fifo = statistics.median(base)
        print(f"{q:>8} {med:>10.1f} {p90:>8.1f} {fifo:>8.1f} {med / fifo:>6.2f} "
              f"{len(d.placements):>7} {len(d.preemptions):>7} {len(d.reservations):>6} "
              f"{len(snap.holds):>5} {len(d.pending):>8}")


if __name__ == "__main__":
    main()
