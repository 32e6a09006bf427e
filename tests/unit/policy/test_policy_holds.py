"""Reservations kept from the previous round (Snapshot.holds)."""

from __future__ import annotations

from policy_builders import job, node, nodes_of, placed, running, snap

from jobs.policy import decide
from jobs.policy.types import PolicyConfig

# n1 drains for a 2-GPU gang: one GPU free, one running job that ends in 10 min; n2 is busy
# for an hour. Org "b" used GPUs before (USAGE), so org "a"'s 1-GPU job ranks ahead of b's gang.
NODES = [node("n1", 2, (1,)), node("n2", 1, ())]
RUNS = [running(0, {"n1": (0,)}, tier="paid", org="c", ends_in=600),
        running(1, {"n2": (0,)}, tier="paid", org="c", ends_in=3600)]
USAGE = {"b": 1e5}
GANG = job(10, tier="paid", org="b", gpus=2, wait=400)  # past its 5-min start SLO
SINGLE = job(11, tier="paid", org="a", gpus=1, wait=0, limit=3600)


def test_without_a_kept_reservation_the_drained_gpu_is_refilled():
    d = decide(snap(NODES, RUNS, [GANG, SINGLE], usage=USAGE))
    assert nodes_of(d, SINGLE.job_id) == ["n1"]


def test_a_kept_reservation_goes_before_jobs_ranked_ahead():
    d = decide(snap(NODES, RUNS, [GANG, SINGLE], usage=USAGE, holds={GANG.job_id: {"n1": 2}}))
    assert not placed(d)
    assert (10, "n1") in [(r.job_id, r.allocations[0].node) for r in d.reservations]
    assert "reserved n1" in d.pending[GANG.job_id].text
    assert d.pending[SINGLE.job_id].code == "resources"


def test_a_job_that_ends_before_the_reservation_still_backfills():
    short = job(11, tier="paid", org="a", gpus=1, limit=60)
    d = decide(snap(NODES, RUNS, [GANG, short], usage=USAGE, holds={GANG.job_id: {"n1": 2}}))
    assert nodes_of(d, short.job_id) == ["n1"]


def test_a_kept_reservation_lends_only_to_jobs_whose_time_limit_ends_first():
    # estimated to end in a minute, but it may run an hour: running over would push back a
    # start the gang was promised, so it waits (by its estimate alone it would backfill)
    hopeful = job(11, tier="paid", org="a", gpus=1, limit=3600, expected_duration_s=60)
    d = decide(snap(NODES, RUNS, [GANG, hopeful], usage=USAGE, holds={GANG.job_id: {"n1": 2}}))
    assert not placed(d)
    assert d.pending[hopeful.job_id].code == "resources"


def test_the_holder_starts_when_its_drained_gpus_are_free():
    nodes = [node("n1", 2, (0, 1)), node("n2", 1, ())]
    d = decide(snap(nodes, RUNS[1:], [GANG, SINGLE], usage=USAGE, holds={GANG.job_id: {"n1": 2}}))
    assert nodes_of(d, GANG.job_id) == ["n1"]
    assert SINGLE.job_id not in placed(d)


def test_a_higher_tier_takes_over_a_lower_tiers_reservation():
    urgent = job(12, tier="enterprise", org="e", gpus=1)
    d = decide(snap(NODES, RUNS, [GANG, urgent], usage=USAGE, holds={GANG.job_id: {"n1": 2}}))
    assert nodes_of(d, urgent.job_id) == ["n1"]
    assert not d.preemptions


def test_a_young_job_is_not_kept_ahead_of_the_walk():
    young = job(10, tier="paid", org="b", gpus=2, wait=30)
    d = decide(snap(NODES, RUNS, [young, SINGLE], usage=USAGE, holds={young.job_id: {"n1": 2}}))
    assert nodes_of(d, SINGLE.job_id) == ["n1"]


def test_a_reservation_on_a_gone_node_moves_to_the_earliest_live_one():
    d = decide(snap(NODES, RUNS, [GANG, SINGLE], usage=USAGE, holds={GANG.job_id: {"gone": 2}}))
    assert (10, "n1") in [(r.job_id, r.allocations[0].node) for r in d.reservations]
    assert SINGLE.job_id not in placed(d)


def test_a_kept_reservation_moves_when_another_node_frees_up_much_sooner():
    nodes = [node("n1", 2, (1,)), node("n3", 2, (1,)), node("n2", 1, ())]
    runs = RUNS + [running(2, {"n3": (0,)}, tier="paid", org="c", ends_in=30)]
    d = decide(snap(nodes, runs, [GANG], usage=USAGE, holds={GANG.job_id: {"n1": 2}}))
    assert [r.allocations[0].node for r in d.reservations] == ["n3"]


def test_one_kept_reservation_per_org():
    nodes = [node("n1", 2, (1,)), node("n3", 2, (1,)), node("n2", 1, ())]
    runs = RUNS + [running(2, {"n3": (0,)}, tier="paid", org="c", ends_in=600)]
    second = job(13, tier="paid", org="b", gpus=2, wait=300)
    holds = {GANG.job_id: {"n1": 2}, second.job_id: {"n3": 2}}
    d = decide(snap(nodes, runs, [GANG, second, SINGLE], usage=USAGE, holds=holds))
    # b's older gang keeps n1; its second reservation is re-ranked, and a's job ranks first
    assert nodes_of(d, SINGLE.job_id) == ["n3"]



def test_a_multi_node_gangs_island_is_planned_again_in_the_walk():
    nodes = [node("n1", 2, (1,)), node("n4", 2, (1,)), node("n2", 1, ())]
    runs = RUNS + [running(2, {"n4": (0,)}, tier="paid", org="c", ends_in=600)]
    big = job(10, tier="paid", org="b", gpus=4, wait=400)
    d = decide(snap(nodes, runs, [big, SINGLE], usage=USAGE, holds={10: {"n1": 2, "n4": 2}}))
    assert SINGLE.job_id in placed(d)  # nothing was held ahead of the walk


def test_a_higher_tier_counts_a_lower_reservations_idle_gpus_once():
    """n0: 5 GPUs free, held by a paid gang of 7 kept from the last round; free-tier jobs run
    on the other 3 (2 end in 1,000 s, 1 in 5,000 s). Taking the hold over, an enterprise
    8-GPU job still lacks 3 GPUs: it must not read the 5 idle GPUs twice (once as the hold's,
    once as free) and wait for a start "now" that never comes; it preempts instead."""
    nodes = [node("n0", 8, (0, 1, 2, 3, 4))]
    runs = [running(1, {"n0": (5, 6)}, tier="free", org="f", ends_in=1000),
            running(2, {"n0": (7,)}, tier="free", org="f", ends_in=5000)]
    gang = job(10, tier="paid", org="b", gpus=7, wait=400)
    urgent = job(20, tier="enterprise", org="e", gpus=8)
    d = decide(snap(nodes, runs, [gang, urgent], holds={gang.job_id: {"n0": 7}}))
    assert {p.attempt_id for p in d.preemptions} == {1, 2}
    assert nodes_of(d, urgent.job_id) == ["n0"]


# As above, with enterprise work running (no victims) and a budget of one reservation: only
# the gang's idle GPU on n1 is left, and it starts in 10 min
BUSY = [running(0, {"n1": (0,)}, tier="enterprise", org="c", ends_in=600),
        running(1, {"n2": (0,)}, tier="enterprise", org="c", ends_in=3600)]
ONE_HOLD = PolicyConfig(max_reservations=1, max_budget_reservations=1)


def test_the_walk_stops_where_no_job_could_borrow_the_idle_reserved_gpus():
    rest = [job(20 + i, tier="paid", org="a", gpus=1, limit=3600) for i in range(5)]
    d = decide(snap(NODES, BUSY, [GANG, *rest], usage=USAGE, config=ONE_HOLD,
                    holds={GANG.job_id: {"n1": 2}}))
    assert not placed(d)
    assert d.pending[rest[0].job_id].code == "resources"  # the first blocked one
    # no job of the queue ends within 10 min: the others share a reason, untried
    assert {d.pending[j.job_id].code for j in rest[1:]} == {"priority"}


def test_the_walk_goes_on_while_a_job_of_the_queue_could_borrow_them():
    rest = [job(20 + i, tier="paid", org="a", gpus=1, limit=3600) for i in range(5)]
    last = job(30, tier="paid", org="d", gpus=1, limit=60)  # heaviest org: ranked last
    d = decide(snap(NODES, BUSY, [GANG, *rest, last], usage={**USAGE, "d": 1e6},
                    config=ONE_HOLD, holds={GANG.job_id: {"n1": 2}}))
    assert placed(d).keys() == {last.job_id} and nodes_of(d, last.job_id) == ["n1"]
    assert {d.pending[j.job_id].code for j in rest} == {"resources"}


def test_a_kept_job_started_past_where_the_walk_stops_needs_no_capacity():
    nodes = [node("n1", 2), node("a1", 1, (), gpu_type="A100")]
    runs = [running(0, {"a1": (0,)}, tier="enterprise", org="c", ends_in=3600)]
    waiting = [job(20 + i, tier="paid", org="a", gpu_types=("A100",)) for i in range(3)]
    d = decide(snap(nodes, runs, [GANG, *waiting], usage=USAGE,
                    holds={GANG.job_id: {"n1": 2}}))
    assert nodes_of(d, GANG.job_id) == ["n1"]  # started before the walk, ranked last
    assert d.pending[waiting[-1].job_id].code == "priority"  # the walk stopped before it
    assert "any" not in d.capacity_advice  # the gang's 2 GPUs are not short


def test_the_walk_goes_on_while_a_higher_tier_could_take_the_idle_gpus_over():
    late_free = job(10, tier="free", org="b", gpus=2, wait=4000)  # past free's 1-h SLO
    big = job(20, tier="paid", org="a", gpus=2, wait=10)  # blocked: one GPU is idle
    small = job(21, tier="paid", org="a", gpus=1)  # takes the free tier's idle GPU over
    d = decide(snap(NODES, BUSY, [late_free, big, small], config=ONE_HOLD,
                    holds={late_free.job_id: {"n1": 2}}))
    assert placed(d).keys() == {small.job_id} and nodes_of(d, small.job_id) == ["n1"]
    assert d.pending[big.job_id].code == "resources"


def test_the_walk_goes_on_while_the_reservation_budget_lasts():
    nodes = [*NODES, node("n3", 1, ())]
    runs = [*BUSY, running(2, {"n3": (0,)}, tier="enterprise", org="c", ends_in=1800)]
    rest = [job(20 + i, tier="paid", org="a", gpus=1, limit=3600) for i in range(3)]
    d = decide(snap(nodes, runs, [GANG, *rest], usage=USAGE,
                    config=PolicyConfig(max_reservations=3, max_budget_reservations=3),
                    holds={GANG.job_id: {"n1": 2}}))
    held = {r.job_id: r.allocations[0].node for r in d.reservations}
    assert held == {GANG.job_id: "n1", rest[0].job_id: "n3", rest[1].job_id: "n2"}


def test_a_starving_job_goes_before_a_younger_jobs_kept_reservation():
    # past `starve_after_s` (12 h) a job goes first in its tier, whatever its org's share:
    # a reservation kept for a job of its tier that waited less does not go before it
    usage = {**USAGE, "heavy": 1e9}
    for waited_h, starts in ((11.0, False), (13.0, True)):
        old = job(12, tier="paid", org="heavy", gpus=1, wait=waited_h * 3600, limit=3600)
        d = decide(snap(NODES, RUNS, [GANG, old], usage=usage, holds={GANG.job_id: {"n1": 2}}))
        assert (old.job_id in placed(d)) is starts
        assert GANG.job_id in d.pending
    assert nodes_of(d, old.job_id) == ["n1"]


def test_a_starving_jobs_own_reservation_is_kept():
    starving = job(10, tier="paid", org="b", gpus=2, wait=13 * 3600)
    d = decide(snap(NODES, RUNS, [starving, SINGLE], usage=USAGE,
                    holds={starving.job_id: {"n1": 2}}))
    assert not placed(d)
    assert (10, "n1") in [(r.job_id, r.allocations[0].node) for r in d.reservations]


def test_a_starving_job_held_back_by_its_org_cap_leaves_kept_reservations_alone():
    # the capped org's job starts nothing this round, so GANG's drain goes on: SINGLE, ranked
    # ahead of GANG by share, still may not take the GPU n1 drained
    capped = job(12, tier="paid", org="heavy", gpus=1, wait=13 * 3600, limit=3600)
    d = decide(snap(NODES, RUNS, [GANG, SINGLE, capped], usage=USAGE,
                    holds={GANG.job_id: {"n1": 2}}, org_gpu_caps={"heavy": 0}))
    assert not placed(d)
    assert d.pending[capped.job_id].code == "org_cap"
    assert (10, "n1") in [(r.job_id, r.allocations[0].node) for r in d.reservations]
