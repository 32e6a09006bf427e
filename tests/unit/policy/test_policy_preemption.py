"""Preemption: when, whom, how much grace, and what never happens."""

from __future__ import annotations

from policy_builders import NOW, job, node, placed, running, snap, tiers

from jobs.policy import decide
from jobs.policy.preemption import Victim, island_plan
from jobs.policy.types import PolicyConfig


def full_node(name: str, **kw):
    return node(name, 8, free=(), **kw)


def test_enterprise_job_about_to_miss_its_slo_preempts_free_work() -> None:
    s = snap([full_node("n0")], [running(1, {"n0": tuple(range(8))}, tier="free")],
             [job(7, tier="enterprise", gpus=8, wait=20)])
    d = decide(s)
    assert [p.attempt_id for p in d.preemptions] == [1]
    assert d.placements[0].preempted and d.placements[0].job_id == 7
    assert d.preemptions[0].for_job_id == 7


def test_victim_is_the_one_that_loses_least_work() -> None:
    nodes = [full_node("n0"), full_node("n1")]
    runs = [
        running(1, {"n0": tuple(range(8))}, ran=3000),  # no checkpoint: loses 3000 s x 8
        running(2, {"n1": tuple(range(8))}, ran=3000, checkpointable=True,
                last_checkpoint_at=1_000_000.0 - 100),  # loses 100 s x 8
    ]
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=8, wait=20)]))
    assert [p.attempt_id for p in d.preemptions] == [2]
    assert placed(d)[7][0].node == "n1"


def test_victims_preempted_before_are_spared() -> None:
    nodes = [full_node("n0"), full_node("n1")]
    runs = [running(1, {"n0": tuple(range(8))}, ran=1000, preemptions=2),
            running(2, {"n1": tuple(range(8))}, ran=1200, preemptions=0)]
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=8, wait=20)]))
    assert [p.attempt_id for p in d.preemptions] == [2]


def test_jobs_about_to_finish_are_spared() -> None:
    nodes = [full_node("n0"), full_node("n1")]
    runs = [running(1, {"n0": tuple(range(8))}, ran=1000, ends_in=300),
            running(2, {"n1": tuple(range(8))}, ran=1200, ends_in=5000)]
    cfg = PolicyConfig(hysteresis_s=30)
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=8, wait=20)], config=cfg))
    assert [p.attempt_id for p in d.preemptions] == [2]


def test_never_preempts_equal_tier_or_non_preemptible_or_capped_or_young() -> None:
    nodes = [full_node(f"n{i}") for i in range(4)]
    runs = [
        running(1, {"n0": tuple(range(8))}, tier="enterprise"),
        running(2, {"n1": tuple(range(8))}, tier="free", preemptible=False),
        running(3, {"n2": tuple(range(8))}, tier="free", preemptions=3),  # tier max is 3
        running(4, {"n3": tuple(range(8))}, tier="free", ran=10),  # below min runtime
    ]
    cfg = PolicyConfig(min_runtime_before_preempt_s=60)
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=8, wait=20)], config=cfg))
    assert d.preemptions == [] and d.placements == []
    assert d.pending[7].code == "resources"


def test_non_preemptible_tier_is_never_a_victim() -> None:
    t = tiers()
    s = snap([full_node("n0")], [running(1, {"n0": tuple(range(8))}, tier="paid")],
             [job(7, tier="enterprise", gpus=8, wait=20)],
             tier_specs={**t, "paid": t["paid"].__class__("paid", 2, preemptible=False)})
    assert decide(s).preemptions == []


def test_hysteresis_waits_for_gpus_that_free_up_soon() -> None:
    s = snap([full_node("n0")], [running(1, {"n0": tuple(range(8))}, ends_in=45)],
             [job(7, tier="paid", gpus=8, wait=290)], config=PolicyConfig(hysteresis_s=60))
    d = decide(s)
    assert d.preemptions == []
    assert d.reservations[0].job_id == 7 and d.reservations[0].start_at == 1_000_045.0


def test_paid_waits_two_minutes_for_its_gpus_rather_than_kill_work() -> None:
    # deadline in 10 s, GPUs free in 90 s: waiting costs 80 s of lateness, a kill costs work
    s = snap([full_node("n0"), full_node("n1")],
             [running(1, {"n0": tuple(range(8))}, ends_in=90),
              running(2, {"n1": tuple(range(8))}, ends_in=4000)],
             [job(7, tier="paid", gpus=8, wait=290)])
    d = decide(s)
    assert d.preemptions == []
    assert d.reservations[0].start_at == 1_000_090.0
    s.queued = [job(7, tier="paid", gpus=8, wait=290)]
    s.running[0] = running(1, {"n0": tuple(range(8))}, ends_in=130)
    assert [p.attempt_id for p in decide(s).preemptions] == [2]


def test_the_wait_window_does_not_spare_victims_ending_after_a_minute() -> None:
    # enterprise may wait 15 s at most; the only victim ends in 90 s: still a victim
    s = snap([full_node("n0")], [running(1, {"n0": tuple(range(8))}, ends_in=90)],
             [job(7, tier="enterprise", gpus=8, wait=5)])
    assert [p.attempt_id for p in decide(s).preemptions] == [1]
    s.running = [running(1, {"n0": tuple(range(8))}, ends_in=50)]
    assert decide(s).preemptions == []


def test_a_start_slo_shorter_than_the_hysteresis_window_shrinks_it() -> None:
    # enterprise SLO 30 s: waiting 45 s for GPUs would miss it, so it preempts
    s = snap([full_node("n0"), full_node("n1")],
             [running(1, {"n0": tuple(range(8))}, ends_in=45),
              running(2, {"n1": tuple(range(8))}, ends_in=4000)],
             [job(7, tier="enterprise", gpus=8, wait=5)], config=PolicyConfig(hysteresis_s=60))
    assert [p.attempt_id for p in decide(s).preemptions] == [2]


def test_hysteresis_holds_after_the_rounds_estimates_are_spent() -> None:
    # free is below its floor, so its blocked gangs go first and use up the round's
    # reservations and estimates; the enterprise gang behind them still gets an estimate
    # (n0 frees up in 5 s, reserved by free) and waits instead of killing paid work
    nodes = [full_node("n0"), full_node("n1"), full_node("n2")]
    runs = [running(1, {"n0": tuple(range(8))}, tier="paid", ends_in=5),
            running(2, {"n1": tuple(range(8))}, tier="paid", ends_in=4000),
            running(3, {"n2": tuple(range(8))}, tier="paid", ends_in=4000)]
    queued = [job(i, tier="free", org=f"f{i}", gpus=8, wait=100) for i in (1, 2, 3)]
    queued.append(job(7, tier="enterprise", gpus=8, wait=20))
    cfg = PolicyConfig(max_explained=2, max_reservations=2, max_budget_reservations=2)
    d = decide(snap(nodes, runs, queued, tier_specs=tiers(free=0.25), config=cfg))
    assert d.preemptions == []
    assert d.pending[7].code == "resources"


def test_no_preemption_while_the_slo_is_far() -> None:
    s = snap([full_node("n0")], [running(1, {"n0": tuple(range(8))}, ends_in=4000)],
             [job(7, tier="free", gpus=8)], tier_specs=tiers())
    # a fresh paid job with 300 s SLO and 120 s lead: not yet about to miss
    s.queued = [job(8, tier="paid", gpus=8, wait=10)]
    assert decide(s).preemptions == []
    s.queued = [job(8, tier="paid", gpus=8, wait=200)]
    assert [p.attempt_id for p in decide(s).preemptions] == [1]


def test_a_tier_below_its_floor_reclaims_lent_gpus() -> None:
    s = snap([full_node("n0"), full_node("n1")],
             [running(1, {"n0": tuple(range(8))}), running(2, {"n1": tuple(range(8))})],
             [job(7, tier="paid", gpus=4)], tier_specs=tiers(paid=0.5))
    d = decide(s)
    assert len(d.preemptions) == 1 and placed(d)[7][0].node in ("n0", "n1")


def test_victim_tier_is_not_pushed_below_its_floor() -> None:
    s = snap([full_node("n0")], [running(1, {"n0": tuple(range(8))})],
             [job(7, tier="enterprise", gpus=8, wait=20)], tier_specs=tiers(free=0.9))
    assert decide(s).preemptions == []


def test_a_gang_victim_goes_whole_and_freed_gpus_go_to_the_preemptor() -> None:
    nodes = [node("n0", 8, free=(0, 1, 2, 3)), full_node("n1")]
    runs = [running(1, {"n0": (4, 5, 6, 7), "n1": tuple(range(8))}, ran=600)]
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=8, wait=20),
                                  job(8, tier="free", gpus=4)]))
    assert [p.attempt_id for p in d.preemptions] == [1]
    assert placed(d)[7][0].node == "n0" and placed(d)[7][0].gpus == tuple(range(8))
    assert 8 not in placed(d)  # the victim's GPUs on n1 are not free yet


def test_grace_reaches_the_next_checkpoint_within_the_cap_and_the_slo() -> None:
    def grace(wait: float = 0.0, **kw) -> float:
        # paid below its floor preempts free work; its start SLO is 300 s
        s = snap([full_node("n0")], [running(1, {"n0": tuple(range(8))}, **kw)],
                 [job(7, tier="paid", gpus=8, wait=wait)], tier_specs=tiers(paid=0.5))
        return decide(s).preemptions[0].grace_s

    every_300 = {"checkpointable": True, "checkpoint_interval_s": 300}
    assert grace(checkpointable=False) == 0.0
    assert grace(**every_300, last_checkpoint_at=NOW - 250) == 50.0
    # the next checkpoint lies past the 120 s cap, or past the preemptor's start SLO:
    # stopped at once, as waiting would save nothing
    assert grace(**every_300, last_checkpoint_at=NOW - 10) == 0.0
    assert grace(wait=280, **every_300, last_checkpoint_at=NOW - 250) == 0.0
    # unknown cadence (it checkpoints when signalled): the cap, within the SLO's slack, but
    # never less than the few seconds a signalled checkpoint takes
    assert grace(checkpointable=True) == 120.0
    assert grace(wait=280, checkpointable=True) == 20.0
    assert grace(wait=400, checkpointable=True) == 10.0


def test_per_org_budget_limits_victims_per_round() -> None:
    nodes = [full_node(f"n{i}") for i in range(3)]
    runs = [running(i, {f"n{i}": tuple(range(8))}) for i in range(3)]
    queued = [job(10 + i, tier="enterprise", gpus=8, wait=20) for i in range(3)]
    d = decide(snap(nodes, runs, queued, config=PolicyConfig(preemption_budget_per_org=2)))
    assert len(d.preemptions) == 2
    assert all(r.code == "resources" for r in d.pending.values())


def test_an_attempt_past_its_estimate_is_not_taken_as_ending_now() -> None:
    nodes = [full_node("n0"), full_node("n1")]
    runs = [running(1, {"n0": tuple(range(8))}, tier="paid", ran=1000, ends_in=-100),
            running(2, {"n1": tuple(range(8))}, tier="paid", ran=30)]
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=8, wait=5)]))
    # n0 overran its estimate by 100 s: expected to run about as long again, so waiting for
    # it would miss the 30 s start SLO; n1's fresh attempt is the cheap victim
    assert [p.attempt_id for p in d.preemptions] == [2]
    assert placed(d)[7][0].node == "n1"


def test_the_overrun_estimate_never_passes_the_time_limit() -> None:
    run = running(1, {"n0": tuple(range(8))}, ends_in=-500)  # limit ends at +100 s
    assert run.predicted_end(1_000_000.0) == 1_000_000.0 + 100
    run = running(2, {"n0": tuple(range(8))}, ends_in=-50)
    assert run.predicted_end(1_000_000.0) == 1_000_000.0 + 50


def test_a_gang_larger_than_a_node_clears_the_cheapest_island() -> None:
    nodes = [full_node("n0", island="i0"), full_node("n1", island="i0"),
             full_node("n2", island="i1"), full_node("n3", island="i1")]
    runs = [running(1, {"n0": tuple(range(8))}, ran=3000),
            running(2, {"n1": tuple(range(8))}, ran=100),
            running(3, {"n2": tuple(range(8))}, ran=200),
            running(4, {"n3": tuple(range(8))}, ran=300)]
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=16, wait=20)]))
    # i0 would lose 3100 s of work on 8 GPUs, i1 500 s: i1 goes, and nothing of i0
    assert sorted(p.attempt_id for p in d.preemptions) == [3, 4]
    assert d.placements[0].preempted
    assert {a.node: a.gpus for a in placed(d)[7]} == {"n2": tuple(range(8)),
                                                      "n3": tuple(range(8))}


def test_an_island_plan_uses_free_gpus_for_the_remainder_and_counts_a_victim_once() -> None:
    nodes = [full_node("n0"), full_node("n1"), node("n2", 8, free=(4, 5, 6, 7))]
    # one free gang holds n0 and n1: stopping it frees both whole nodes
    runs = [running(1, {"n0": tuple(range(8)), "n1": tuple(range(8))}, ran=100),
            running(2, {"n2": (0, 1, 2, 3)}, tier="paid", ran=50)]
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=20, wait=20)]))
    assert [p.attempt_id for p in d.preemptions] == [1]
    assert {a.node: a.gpus for a in placed(d)[7]} == {
        "n0": tuple(range(8)), "n1": tuple(range(8)), "n2": (4, 5, 6, 7)}


def test_an_island_plan_takes_any_gpus_of_the_island_not_whole_nodes() -> None:
    nodes = [node("n0", 8, free=(4, 5, 6, 7)), node("n1", 8, free=(4, 5, 6, 7)), full_node("n2")]
    runs = [running(1, {"n0": (0, 1, 2, 3)}, ran=1000),  # 4 GPUs x 1030 s lost
            running(2, {"n1": (0, 1, 2, 3)}, ran=1000),
            running(3, {"n2": tuple(range(8))}, ran=300)]  # 8 GPUs x 330 s: the cheapest
    d = decide(snap(nodes, runs, [job(7, tier="enterprise", gpus=16, wait=20)]))
    # 8 GPUs are free on the island: one victim of 8 makes the gang, no node is cleared whole
    assert [p.attempt_id for p in d.preemptions] == [3]
    assert {a.node: a.gpus for a in placed(d)[7]} == {
        "n2": tuple(range(8)), "n0": (4, 5, 6, 7), "n1": (4, 5, 6, 7)}


def test_an_island_plan_finishes_with_one_small_victim_rather_than_the_best_ratio() -> None:
    big = Victim(running(1, {"n1": tuple(range(7))}), 0, 70.0, 7, {"n1": list(range(7))})
    small = Victim(running(2, {"n1": (7,)}), 0, 15.0, 1, {"n1": [7]})
    lists = {"n1": [small, big]}
    plan = island_plan(["n0", "n1"], 9, lists, {"n0": 8, "n1": 0}, {"free": 99.0}, 5)
    # 1 GPU is missing: the 7-GPU victim frees GPUs cheaper per GPU, the 1-GPU one is enough
    assert plan is not None and plan.victims == [small]
    assert plan.parts == {"n0": 8, "n1": 1}
    assert island_plan(["n0", "n1"], 9, lists, {"n0": 8, "n1": 0}, {"free": 0.0}, 5) is None


def test_an_island_plan_spares_a_victim_a_later_one_made_redundant() -> None:
    def victim(aid: int, gpus: tuple[int, ...], cost: float) -> Victim:
        return Victim(running(aid, {"n1": gpus}), 0, cost, len(gpus), {"n1": list(gpus)})

    one, two, four = victim(1, (0,), 1.0), victim(2, (1, 2), 2.2), victim(3, (3, 4, 5, 6), 4.8)
    plan = island_plan(["n0", "n1"], 14, {"n1": [one, two, four]}, {"n0": 8, "n1": 0},
                       {"free": 99.0}, 5)
    # by cost per GPU it takes all three to free 6; the 1-GPU job is then not needed
    assert plan is not None and plan.victims == [two, four] and plan.cost == 7.0
    assert plan.parts == {"n0": 8, "n1": 6}


def test_an_island_plan_spends_one_budget_and_respects_the_victims_floor() -> None:
    nodes = [full_node("n0"), full_node("n1")]
    runs = [running(1, {"n0": tuple(range(8))}), running(2, {"n1": tuple(range(8))})]
    gang = [job(7, tier="enterprise", gpus=16, wait=20)]
    one_victim = PolicyConfig(preemption_budget_per_org=1)
    assert decide(snap(nodes, runs, gang, config=one_victim)).preemptions == []
    # free keeps half the fleet: clearing both nodes would push it below its floor
    assert decide(snap(nodes, runs, gang, tier_specs=tiers(free=0.5))).preemptions == []
    assert len(decide(snap(nodes, runs, gang)).preemptions) == 2
