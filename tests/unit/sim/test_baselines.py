"""Baseline policies: strict tier order, Slurm multifactor priority, EASY backfill."""

import random

from jobs.policy.baselines import (
    PRIORITY_MAX_AGE_S,
    W_AGE,
    W_FAIRSHARE,
    W_QOS,
    multifactor_decide,
    multifactor_priority,
    priority_decide,
)
from jobs.policy.classic_fairshare import classic_fairshare
from jobs.policy.types import Allocation, NodeView, QueuedJob, RunningView, Snapshot
from jobs.sim.model import default_tiers

TIERS = default_tiers()


def node(name, total=8, free=None, island="i0"):
    free = tuple(range(total)) if free is None else tuple(free)
    return NodeView(name, "H100", 81920, total, free, island=island)


def q(i, tier="free", gpus=1, at=0.0, org=None, limit=3600.0):
    return QueuedJob(i, org or f"org-{tier}", tier, gpus, at, limit)


def run(i, nodename, gpus, end, org="x", tier="free"):
    return RunningView(i, 1000 + i, org, tier, (Allocation(nodename, tuple(gpus)),), 0.0, end, end)


def test_priority_strict_tier_order():
    snap = Snapshot(100.0, [node("n0", 2)], [],
                    [q(1, "free", at=0), q(2, "paid", at=10), q(3, "enterprise", at=20)], TIERS)
    dec = priority_decide(snap)
    assert [p.job_id for p in dec.placements] == [3, 2]
    assert dec.pending[1].code == "resources" and not dec.preemptions


def test_priority_head_of_line_blocking_per_tier():
    snap = Snapshot(100.0, [node("n0", 8, free=range(2))], [],
                    [q(1, "paid", gpus=4, at=0), q(2, "paid", at=1), q(3, "free", at=2)], TIERS)
    dec = priority_decide(snap)
    assert [p.job_id for p in dec.placements] == [3]  # paid head blocks paid, not free
    assert dec.pending[1].code == "resources" and dec.pending[2].code == "priority_queue"


def test_every_unplaced_job_has_a_reason():
    rng = random.Random(3)
    for _ in range(50):
        jobs = [q(i, rng.choice(list(TIERS)), gpus=rng.choice([1, 2, 4, 8, 16]), at=rng.random())
                for i in range(30)]
        snap = Snapshot(10.0, [node(f"n{k}", 8, free=range(rng.randint(0, 8))) for k in range(3)],
                        [], jobs, TIERS)
        for decide in (priority_decide, multifactor_decide):
            dec = decide(snap)
            placed = {p.job_id for p in dec.placements}
            assert all(j.job_id in placed or j.job_id in dec.pending for j in jobs)


def test_multifactor_priority_formula():
    now = 2 * 86400.0
    jobs = [q(1, "enterprise", at=now - 86400, org="a"), q(2, "free", at=now, org="b"),
            q(3, "free", at=now, org="c")]
    usage = {"a": 300.0, "b": 100.0, "c": 0.0}
    snap = Snapshot(now, [node("n0")], [], jobs, TIERS, usage=usage)
    prio = multifactor_priority(snap)
    # shares: enterprise weight 4, free weight 1 (two orgs) -> a 0.8, b 0.1, c 0.1
    # effective usage: UE = UN + (UE_tier - UN) * 1/2 in free (UE_tier 0.25): b 0.25, c 0.125
    expect_a = W_AGE * 86400 / PRIORITY_MAX_AGE_S + W_FAIRSHARE * 2 ** (-0.75 / 0.8) + W_QOS
    expect_b = W_FAIRSHARE * 2 ** (-0.25 / 0.1) + W_QOS / 3
    expect_c = W_FAIRSHARE * 2 ** (-0.125 / 0.1) + W_QOS / 3
    assert abs(prio[1] - expect_a) < 1e-6
    assert abs(prio[2] - expect_b) < 1e-6 and abs(prio[3] - expect_c) < 1e-6
    assert expect_a > expect_c > expect_b
    order = [p.job_id for p in multifactor_decide(
        Snapshot(now, [node("n0", 8, free=[0, 1, 2])], [], jobs, TIERS, usage=usage)).placements]
    assert order == [1, 3, 2]
    order = [p.job_id for p in multifactor_decide(
        Snapshot(now, [node("n0", 8, free=[0])], [], jobs, TIERS, usage=usage)).placements]
    assert order == [1]


def test_multifactor_backfills_only_what_does_not_delay_the_reservation():
    now = 0.0
    nodes = [node("n0", 8, free=range(4))]
    running = [run(1, "n0", range(4, 8), end=1000.0)]
    jobs = [q(1, "enterprise", gpus=8, at=0), q(2, "free", gpus=2, at=1, limit=500),
            q(3, "free", gpus=2, at=2, limit=5000, org="other")]
    dec = multifactor_decide(Snapshot(now, nodes, running, jobs, TIERS))
    assert [r.job_id for r in dec.reservations] == [1]
    assert dec.reservations[0].start_at == 1000.0
    assert [p.job_id for p in dec.placements] == [2]  # ends at 500 <= 1000; job 3 would delay
    assert dec.pending[3].code == "priority"


def _earliest(snap, top):
    dec = multifactor_decide(Snapshot(snap.now, snap.nodes, snap.running, [top], TIERS))
    return dec.reservations[0].start_at if dec.reservations else snap.now


def test_multifactor_easy_backfill_never_delays_the_reservation():
    rng = random.Random(7)
    checked = 0
    for _ in range(300):
        nodes, running, rid = [], [], 0
        for k in range(rng.randint(1, 4)):
            busy = rng.sample(range(8), rng.randint(0, 8))
            for g in busy:
                rid += 1
                running.append(run(rid, f"n{k}", [g], end=rng.choice([100.0, 300, 900, 2000])))
            nodes.append(node(f"n{k}", 8, free=[g for g in range(8) if g not in busy]))
        jobs = [q(i, rng.choice(list(TIERS)), gpus=rng.choice([1, 2, 4, 8]), at=rng.random(),
                  org=f"o{i % 3}", limit=rng.choice([50.0, 200, 600, 5000]))
                for i in range(12)]
        snap = Snapshot(0.0, nodes, running, jobs, TIERS)
        dec = multifactor_decide(snap)
        if not dec.reservations:
            continue
        res = dec.reservations[0]
        top = next(j for j in jobs if j.job_id == res.job_id)
        limits = {j.job_id: j.time_limit_s for j in jobs}
        rid_next = 10_000
        after_running = list(running)
        for p in dec.placements:
            rid_next += 1
            end = limits[p.job_id]
            after_running.append(RunningView(rid_next, p.job_id, "x", "free", p.allocations,
                                             0.0, end, end))
        used = {(a.node, g) for p in dec.placements for a in p.allocations for g in a.gpus}
        after_nodes = [NodeView(n.name, n.gpu_type, n.gpu_memory_mb, n.total_gpus,
                                tuple(g for g in n.free_gpus if (n.name, g) not in used),
                                island=n.island) for n in nodes]
        after = Snapshot(0.0, after_nodes, after_running, [], TIERS)
        assert _earliest(after, top) <= res.start_at
        checked += 1
    assert checked > 50


def test_classic_fairshare_descends_to_projects_and_users():
    """Slurm's classic effective usage, by hand: root -> paid -> o1 -> {p1: {u1, u2}, p2}.

    Usage: u1 300, u2 0 (p1 300), p2 100 (o1 400), o2 (paid too) 0; root 400.
    UE: paid 1.0; o1 1.0 + (1.0 - 1.0) / 2 = 1.0; o2 0 + 1.0 / 2 = 0.5;
    p1 0.75 + (1.0 - 0.75) / 2 = 0.875; p2 0.25 + 0.75 / 2 = 0.625;
    u1 0.75 + (0.875 - 0.75) / 2 = 0.8125; u2 0 + 0.875 / 2 = 0.4375.
    S (paid alone): o1 1/2, p1 and p2 1/4, u1 and u2 1/8; o2's single user 1/2.
    """
    def job(i, org, project, user):
        return QueuedJob(i, org, "paid", 1, 0.0, 600.0, project=project, user=user)

    jobs = [job(1, "o1", "p1", "u1"), job(2, "o1", "p1", "u2"), job(3, "o1", "p2", ""),
            job(4, "o2", "", "")]
    snap = Snapshot(0.0, [node("n0")], [], jobs, TIERS, usage={"o1": 400.0, "o2": 0.0},
                    project_usage={("o1", "p1"): 300.0, ("o1", "p2"): 100.0},
                    user_usage={("o1", "p1", "u1"): 300.0, ("o1", "p1", "u2"): 0.0,
                                ("o1", "p2", ""): 100.0})
    fs = classic_fairshare(snap)
    expect = {("o1", "p1", "u1"): 2 ** (-0.8125 * 8), ("o1", "p1", "u2"): 2 ** (-0.4375 * 8),
              ("o1", "p2", ""): 2 ** (-0.625 * 4), ("o2", "", ""): 2 ** (-0.5 * 2)}
    assert fs.keys() == expect.keys()
    for key, value in expect.items():
        assert abs(fs[key] - value) < 1e-12, key
    # o2, which used nothing, first; u2 before u1, though its project's usage ranks it
    # after p2 (effective usage carries the parent's)
    order = sorted(jobs, key=lambda j: -multifactor_priority(snap)[j.job_id])
    assert [j.job_id for j in order] == [4, 3, 2, 1]


def test_classic_fairshare_of_a_snapshot_with_usage_per_organization_only():
    """One project and one user per org: they inherit the org's usage and factor."""
    jobs = [q(1, "paid", org="a"), q(2, "paid", org="b")]
    snap = Snapshot(0.0, [node("n0")], [], jobs, TIERS, usage={"a": 300.0, "b": 100.0})
    fs = classic_fairshare(snap)
    # UE: a 0.75 + (1 - 0.75) / 2 = 0.875, b 0.25 + 0.75 / 2 = 0.625; S 1/2 each
    assert abs(fs["a", "", ""] - 2 ** (-1.75)) < 1e-12
    assert abs(fs["b", "", ""] - 2 ** (-1.25)) < 1e-12
