"""Gang placement, best fit, type preference, backfill, pending reasons, capacity advice."""

from __future__ import annotations

from policy_builders import NOW, job, node, nodes_of, placed, running, snap, tiers

from jobs.policy import POLICIES, decide
from jobs.policy.types import PolicyConfig


def test_best_fit_keeps_whole_nodes_free() -> None:
    nodes = [node("whole", 8), node("part", 8, free=(5, 6, 7))]
    runs = [running(1, {"part": (0, 1, 2, 3, 4)})]
    d = decide(snap(nodes, runs, [job(1, gpus=2), job(2, gpus=8, wait=-1)]))
    assert nodes_of(d, 1) == ["part"] and nodes_of(d, 2) == ["whole"]


def test_first_gpu_type_in_preference_order_that_fits_wins() -> None:
    nodes = [node("h", 8), node("a", 8, gpu_type="A100")]
    d = decide(snap(nodes, queued=[job(1, gpu_types=("A100", "H100"))]))
    assert nodes_of(d, 1) == ["a"]
    d = decide(snap([node("h", 8), node("a", 8, free=(), gpu_type="A100")],
                    [running(1, {"a": tuple(range(8))})], [job(1, gpu_types=("A100", "H100"))]))
    assert nodes_of(d, 1) == ["h"]


def test_memory_floor_and_region() -> None:
    nodes = [node("small", 8, mem=40_000), node("big", 8, mem=80_000, region="eu"),
             node("big-us", 8, mem=80_000, region="us")]
    d = decide(snap(nodes, queued=[job(1, min_gpu_memory_mb=60_000, region="us")]))
    assert nodes_of(d, 1) == ["big-us"]


def test_a_retry_goes_to_another_node_than_the_one_it_failed_on_where_one_fits() -> None:
    nodes = [node("part", 8, free=(6, 7)), node("other", 8, free=(4, 5, 6, 7))]
    runs = [running(1, {"part": tuple(range(6)), "other": (0, 1, 2, 3)})]
    assert nodes_of(decide(snap(nodes, runs, [job(1, gpus=2)])), 1) == ["part"]  # best fit
    assert nodes_of(decide(snap(nodes, runs, [job(1, gpus=2, avoid="part")])), 1) == ["other"]
    # where no other node holds it now, it does not wait for one
    assert nodes_of(decide(snap(nodes, runs, [job(1, gpus=4, avoid="other")])), 1) == [
        "other"]


def test_a_gang_spanning_nodes_retries_without_the_node_its_try_failed_on() -> None:
    nodes = [node("a0", island="a"), node("a1", island="a"), node("b0", island="b"),
             node("b1", island="b"), node("b2", island="b")]
    first = sorted(nodes_of(decide(snap(nodes, queued=[job(1, gpus=16)])), 1))
    assert first == ["a0", "a1"]  # the island with the fewest whole free nodes
    again = sorted(nodes_of(decide(snap(nodes, queued=[job(1, gpus=16, avoid="a1")])), 1))
    assert again == ["b0", "b1"]
    # where no island holds it without that node now, it does not wait for one
    assert sorted(nodes_of(decide(snap(nodes[:2], queued=[job(1, gpus=16, avoid="a1")])),
                           1)) == ["a0", "a1"]


def test_gang_larger_than_a_node_stays_in_one_island() -> None:
    nodes = [node("a0", island="a"), node("b0", island="b"), node("b1", island="b")]
    d = decide(snap(nodes, queued=[job(1, gpus=16)]))
    assert sorted(nodes_of(d, 1)) == ["b0", "b1"]
    d = decide(snap(nodes[:2], queued=[job(1, gpus=16)]))
    assert d.placements == [] and d.pending[1].code == "no_fit"


def test_a_gang_larger_than_a_node_takes_free_gpus_of_one_island_most_free_first() -> None:
    """No island has two whole free nodes, but island b holds 16 free GPUs on three nodes:
    the gang starts there, on the nodes with the most free GPUs, as the baselines place it."""
    nodes = [node("a0", free=tuple(range(7)), island="a"), node("a1", free=(0,), island="a"),
             node("b0", free=tuple(range(6)), island="b"), node("b1", free=tuple(range(7)),
                                                              island="b"),
             node("b2", free=tuple(range(4)), island="b")]
    runs = [running(1, {"a0": (7,), "a1": tuple(range(1, 8)), "b0": (6, 7), "b1": (7,),
                        "b2": (4, 5, 6, 7)})]
    d = decide(snap(nodes, runs, [job(1, gpus=16)]))
    assert {a.node: len(a.gpus) for a in placed(d)[1]} == {"b1": 7, "b0": 6, "b2": 3}


def test_a_gang_larger_than_a_node_reserves_the_earliest_gpus_of_one_island() -> None:
    """Island i0: 8 GPUs are free now, n0 frees 4 more at +100 s and n1 2 at +200 s and its
    last 2 at +900 s: a 14-GPU gang can start at +200 s on GPUs of both nodes, not when two
    nodes are whole (+900 s)."""
    nodes = [node("n0", free=(0, 1, 2, 3)), node("n1", free=(0, 1, 2, 3))]
    runs = [running(1, {"n0": (4, 5, 6, 7)}, ends_in=100),
            running(2, {"n1": (4, 5)}, ends_in=200), running(3, {"n1": (6, 7)}, ends_in=900)]
    d = decide(snap(nodes, runs, [job(1, gpus=14)]))
    [reservation] = d.reservations
    assert reservation.start_at == NOW + 200
    assert {a.node: len(a.gpus) for a in reservation.allocations} == {"n0": 8, "n1": 6}


def test_while_no_node_takes_work_every_job_waits_with_a_reason() -> None:
    nodes = [node("down", schedulable=False), node("cordoned", 8, free=(), schedulable=False)]
    runs = [running(1, {"cordoned": tuple(range(8))})]
    queued = [job(i, tier=("enterprise", "paid", "free")[i % 3], org=f"o{i % 5}", wait=i)
              for i in range(60)] + [job(99, tier="gold")]
    d = decide(snap(nodes, runs, queued))
    assert d.placements == [] and d.preemptions == [] and d.reservations == []
    assert {j: r.code for j, r in d.pending.items()} == {
        **{i: "out_of_service" for i in range(60)}, 99: "unknown_tier"}
    assert "no node takes work" in d.pending[0].text


def test_without_spanning_a_gang_larger_than_every_node_never_fits() -> None:
    nodes = [node("b0", island="b"), node("b1", island="b")]
    single_node = PolicyConfig(span_nodes=False)
    for name, policy in POLICIES.items():
        d = policy(snap(nodes, queued=[job(1, gpus=16), job(2, gpus=8, wait=-1)],
                        config=single_node))
        assert 1 not in placed(d), name
        assert d.pending[1].code in ("no_fit", "unsatisfiable"), name
        assert nodes_of(d, 2) in (["b0"], ["b1"]), name


def test_gang_gets_all_or_nothing() -> None:
    nodes = [node("n0", 8, free=(0, 1, 2)), node("n1", 8, free=(0, 1, 2))]
    runs = [running(1, {"n0": (3, 4, 5, 6, 7)}), running(2, {"n1": (3, 4, 5, 6, 7)})]
    d = decide(snap(nodes, runs, [job(1, gpus=4)]))
    assert d.placements == [] and d.pending[1].code == "resources"


def blocked_head():
    """n0: 4 free, 4 busy until +600 s; an 8-GPU paid job is first in line."""
    nodes = [node("n0", 8, free=(0, 1, 2, 3))]
    runs = [running(1, {"n0": (4, 5, 6, 7)}, tier="paid", ends_in=600)]
    return nodes, runs, job(1, gpus=8, wait=100)


def test_blocked_head_gets_a_reservation_and_a_reason_with_its_start() -> None:
    nodes, runs, head = blocked_head()
    d = decide(snap(nodes, runs, [head]))
    (res,) = d.reservations
    assert res.job_id == 1 and res.start_at == NOW + 600
    assert res.allocations[0].node == "n0" and res.allocations[0].gpus == tuple(range(8))
    reason = d.pending[1]
    assert reason.code == "resources" and reason.estimated_start == NOW + 600
    assert reason.text.startswith("needs 8 free GPUs on one node; reserved n0, estimated start")


def test_backfill_starts_only_jobs_that_end_before_the_reservation() -> None:
    nodes, runs, head = blocked_head()
    short = job(2, gpus=2, limit=300)
    long = job(3, gpus=2, limit=3600)
    d = decide(snap(nodes, runs, [head, short, long]))
    assert list(placed(d)) == [2]
    assert d.pending[3].code == "resources"
    assert d.reservations[0].start_at == NOW + 600  # not delayed


def test_backfill_on_a_fresh_reservation_goes_by_the_estimate() -> None:
    nodes, runs, head = blocked_head()
    hopeful = job(2, gpus=2, limit=3600, expected_duration_s=100)  # ends before +600, likely
    d = decide(snap(nodes, runs, [head, hopeful]))
    assert list(placed(d)) == [2]


def test_backfill_uses_gpus_the_reservation_does_not_need() -> None:
    nodes = [node("n0", 8, free=(0, 1, 2, 3)), node("n1", 8, free=(0,))]
    runs = [running(1, {"n0": (4, 5, 6, 7)}, ends_in=600),
            running(2, {"n1": tuple(range(1, 8))}, ends_in=7200)]
    d = decide(snap(nodes, runs, [job(1, gpus=8, wait=100), job(3, gpus=1, limit=3600)]))
    assert nodes_of(d, 3) == ["n1"]


def test_what_if_names_a_relaxation_that_starts_sooner() -> None:
    nodes = [node("h", 8, free=(0,)), node("a", 8, gpu_type="A100")]
    runs = [running(1, {"h": tuple(range(1, 8))})]
    d = decide(snap(nodes, runs, [job(1, gpus=4, gpu_types=("H100",))]))
    assert "A100" in d.pending[1].what_if
    d = decide(snap(nodes[:1], runs, [job(1, gpus=4, gpu_types=("H100",), min_gpus=1)]))
    assert "1 GPUs" in d.pending[1].what_if


def test_a_job_no_node_can_hold_as_asked_is_told_what_would_start_it() -> None:
    nodes = [node("h", 4), node("a", 8, gpu_type="A100")]
    queued = [job(i, gpus=8, gpu_types=("H100",), wait=10 - i) for i in (1, 2)]
    queued.append(job(3, gpus=8, gpu_types=("H100",), min_gpus=2))
    d = decide(snap(nodes[:1], queued=queued[2:]))
    assert (d.pending[3].code, d.pending[3].what_if) == (
        "no_fit", "would start now with 4 GPUs (the job accepts 2)")
    d = decide(snap(nodes, queued=queued[:2]))
    assert [d.pending[i].code for i in (1, 2)] == ["no_fit", "no_fit"]
    assert d.pending[1].what_if == "would start now on A100 if the job allowed that type"
    assert d.pending[1] is d.pending[2]  # one reason for every job of one shape


def test_a_gang_larger_than_a_node_is_told_how_many_would_start_it_across_its_island(
) -> None:
    nodes = [node("h1", 8), node("h2", 8, free=(0, 1, 2, 3))]  # 12 free in island i0
    runs = [running(1, {"h2": (4, 5, 6, 7)}, tier="paid")]
    d = decide(snap(nodes, runs, [job(1, gpus=16, min_gpus=8)]))
    assert d.pending[1].what_if == "would start now with 12 GPUs (the job accepts 8)"
    # where gangs may not span nodes, only what one node holds is offered
    one_node = PolicyConfig(span_nodes=False)
    d = decide(snap(nodes, runs, [job(1, gpus=16, min_gpus=8)], config=one_node))
    assert d.pending[1].what_if == "would start now with 8 GPUs (the job accepts 8)"


def test_what_if_names_a_relaxation_that_starts_a_blocked_job_sooner() -> None:
    # H100s free in an hour, A100s in 10 min; half of the H100 node in 5 min
    nodes = [node("h", 8, free=()), node("a", 8, free=(), gpu_type="A100")]
    runs = [running(1, {"h": (0, 1, 2, 3)}, tier="paid", ends_in=3600),
            running(2, {"h": (4, 5, 6, 7)}, tier="paid", ends_in=300),
            running(3, {"a": tuple(range(8))}, tier="paid", ends_in=600)]
    d = decide(snap(nodes, runs, [job(1, gpus=8, gpu_types=("H100",))]))
    assert d.pending[1].what_if.startswith("would start by ")
    assert d.pending[1].what_if.endswith(" on A100 if the job allowed that type")
    d = decide(snap(nodes, runs, [job(1, gpus=8, gpu_types=("H100",), min_gpus=4)]))
    assert d.pending[1].what_if.endswith(" with 4 GPUs (the job accepts 4)")  # 5 min < 10
    # nothing to say when the relaxation would not start it a minute sooner
    later = [running(3, {"a": tuple(range(8))}, tier="paid", ends_in=3590), *runs[:2]]
    d = decide(snap(nodes, later, [job(1, gpus=8, gpu_types=("H100",))]))
    assert d.pending[1].code == "resources" and d.pending[1].what_if == ""


def test_a_blocked_gang_larger_than_a_node_is_told_what_would_start_it_sooner() -> None:
    # island i0: h1 frees 4 GPUs in 5 min and 4 in an hour, h2 all 8 in 10 min; all paid
    nodes = [node("h1", free=()), node("h2", free=())]
    runs = [running(1, {"h1": (0, 1, 2, 3)}, tier="paid", ends_in=300),
            running(2, {"h1": (4, 5, 6, 7)}, tier="paid", ends_in=3600),
            running(3, {"h2": tuple(range(8))}, tier="paid", ends_in=600)]
    d = decide(snap(nodes, runs, [job(1, gpus=16, min_gpus=8)]))
    [reservation] = d.reservations
    assert reservation.start_at == NOW + 3600
    # 12 GPUs across both nodes in 10 min: the largest gang that starts that soon
    assert d.pending[1].what_if.startswith("would start by ")
    assert d.pending[1].what_if.endswith(" with 12 GPUs (the job accepts 8)")
    # an island of another type that drains sooner
    a100 = [node(f"a{i}", free=(), gpu_type="A100", island="i1") for i in (1, 2)]
    runs += [running(4 + i, {f"a{i}": tuple(range(8))}, tier="paid", ends_in=900)
             for i in (1, 2)]
    d = decide(snap(nodes + a100, runs, [job(1, gpus=16, gpu_types=("H100",))]))
    assert d.pending[1].what_if.endswith(" on A100 if the job allowed that type")


def test_only_the_jobs_explained_in_full_get_a_what_if() -> None:
    # past max_explained a blocked job gets neither an estimate nor a what-if: both cost a
    # search per job, and a long queue would pay them for every job the walk reaches
    nodes = [node("h", 8, free=(0,)), node("a", 8, gpu_type="A100")]
    runs = [running(1, {"h": tuple(range(1, 8))}, tier="paid")]
    cfg = PolicyConfig(max_explained=2, max_reservations=0, max_budget_reservations=0)
    queued = [job(i, gpus=4, gpu_types=("H100",), wait=100 - i) for i in range(1, 5)]
    d = decide(snap(nodes, runs, queued, config=cfg))
    assert ["A100" in d.pending[i].what_if for i in range(1, 5)] == [True, True, False, False]
    assert [d.pending[i].code for i in range(1, 5)] == ["resources"] * 4


def test_lower_tier_above_its_share_is_told_so() -> None:
    nodes = [node("n0", 8, free=())]
    runs = [running(1, {"n0": tuple(range(8))}, tier="free", ran=10)]
    queued = [job(1, "paid", gpus=8)] + [job(10 + i, "free") for i in range(3)]
    cfg = PolicyConfig(backfill_depth=1, min_runtime_before_preempt_s=60)  # ran=10: no victim
    d = decide(snap(nodes, runs, queued, config=cfg))
    assert d.pending[1].code == "resources"
    assert {d.pending[10 + i].text for i in range(3)} == {
        "tier free is above its share (guaranteed 0 GPUs) while paid waits"}


def test_rest_of_a_long_queue_shares_reasons_after_the_fleet_fills() -> None:
    queued = [job(i, "free", wait=5000 - i) for i in range(50)] + [job(99, "paid", gpus=8)]
    nodes = [node("n0", 8, free=())]
    runs = [running(1, {"n0": tuple(range(8))}, tier="free", ran=5)]
    d = decide(snap(nodes, runs, queued))
    assert len(d.pending) == 51
    texts = {d.pending[i].text for i in range(1, 50)}
    assert any("above its share" in t or "higher-ranked" in t or "needs" in t for t in texts)


def test_capacity_advice_counts_gpus_of_jobs_past_their_slo() -> None:
    nodes = [node("n0", 8, free=())]
    runs = [running(1, {"n0": tuple(range(8))}, tier="enterprise", ends_in=7200)]
    queued = [job(1, "paid", gpus=4, wait=1000, gpu_types=("H100",)),
              job(2, "free", gpus=2, wait=10)]
    d = decide(snap(nodes, runs, queued))
    assert d.capacity_advice == {"H100": 4}


def test_capacity_advice_counts_late_jobs_past_the_walk_once_and_not_capped_orgs() -> None:
    nodes = [node("n0", 8, free=())]
    runs = [running(1, {"n0": tuple(range(8))}, tier="enterprise", ends_in=7200)]
    late = [job(i, "paid", "a", gpus=2, wait=1000 + i, gpu_types=("H100",)) for i in range(6)]
    capped = [job(10 + i, "paid", "b", gpus=4, wait=2000) for i in range(3)]
    on_time = [job(20 + i, "free", "c", gpus=1, wait=10) for i in range(4)]
    cfg = PolicyConfig(backfill_depth=2)  # the walk reaches one job of org a, not six
    d = decide(snap(nodes, runs, late + capped + on_time, config=cfg,
                    org_gpu_caps={"b": 2}))
    assert d.pending[5].code == "resources"  # the oldest, reached
    assert {d.pending[i].code for i in range(5)} == {"priority"}  # past the walk
    assert d.pending[10].code == "org_cap"
    assert d.capacity_advice == {"H100": 12}


def test_cordoned_nodes_get_nothing() -> None:
    d = decide(snap([node("n0", 8, schedulable=False)], queued=[job(1)]))
    assert d.placements == [] and d.pending[1].code == "out_of_service"


def test_a_job_only_nodes_out_of_service_can_hold_waits_for_them_not_for_a_new_request(
) -> None:
    nodes = [node("small", 2, island="a"), node("big", 8, schedulable=False, island="b"),
             node("b2", 4, island="b"), node("l40", 8, gpu_type="L40S", island="c")]
    queued = [job(1, gpus=8, gpu_types=("H100",)), job(2, gpus=12, gpu_types=("H100",)),
              job(3, gpus=24, gpu_types=("H100",)), job(4, gpus=4, min_gpu_memory_mb=90_000)]
    d = decide(snap(nodes, queued=queued))
    one = d.pending[1]  # only the cordoned node holds 8 H100 on one node
    assert one.code == "out_of_service" and "it starts when one returns" in one.text
    assert one.what_if == "would start now on L40S if the job allowed that type"
    assert d.pending[2].code == "out_of_service"  # island b, whole again, holds 12
    assert d.pending[3].code == "no_fit"  # no island holds 24, in service or not
    assert d.pending[4].code == "no_fit"  # no node of such memory at all
    d = decide(snap(nodes, queued=queued, config=PolicyConfig(span_nodes=False)))
    assert d.pending[2].code == "no_fit"  # gangs stay on one node
    assert "due back" not in one.text  # nothing says when the cordoned node returns


def test_the_reason_names_when_a_node_in_maintenance_is_due_back() -> None:
    nodes = [node("a", 8, schedulable=False, until=NOW - 60, back_at=NOW + 7200),
             node("b", 8, schedulable=False), node("c", 8, schedulable=False,
                                                    back_at=NOW + 600)]
    d = decide(snap(nodes[:2] + [node("d", 1)], queued=[job(1, gpus=4)]))
    assert d.pending[1].code == "out_of_service"
    assert d.pending[1].text.endswith("the first is due back by 15:46 UTC (in 2.0 h)")
    d = decide(snap(nodes + [node("d", 1)], queued=[job(1, gpus=4)]))
    assert d.pending[1].text.endswith("(in 10 min)")


def test_unknown_tier_is_explained() -> None:
    d = decide(snap([node("n0", 8)], queued=[job(1, tier="gold")]))
    assert d.pending[1].code == "unknown_tier"


def test_lower_tier_yields_gpus_a_blocked_higher_tier_gang_needs_soon() -> None:
    # the paid gang gets no reservation; n0 holds 8 GPUs in 100 s, so a free job that would
    # still run then must not take them, while one that ends before may (it delays nothing)
    nodes = [node("n0", 8, free=(0, 1, 2, 3))]
    runs = [running(1, {"n0": (4, 5, 6, 7)}, tier="enterprise", ends_in=100)]
    queued = [job(1, "paid", gpus=8), job(2, "free", gpus=2, expected_duration_s=3000),
              job(3, "free", gpus=2, expected_duration_s=50, limit=120)]
    cfg = PolicyConfig(max_reservations=0, max_budget_reservations=0)
    d = decide(snap(nodes, runs, queued, config=cfg))
    assert d.pending[1].code == "resources"
    assert d.pending[2].code == "tier_share" and "while paid waits" in d.pending[2].text
    assert nodes_of(d, 3) == ["n0"]


def test_a_tier_within_its_floor_does_not_yield() -> None:
    nodes = [node("n0", 8, free=(0, 1, 2, 3))]
    runs = [running(1, {"n0": (4, 5, 6, 7)}, tier="enterprise", ends_in=100)]
    queued = [job(1, "paid", gpus=8), job(2, "free", gpus=2, expected_duration_s=3000)]
    cfg = PolicyConfig(max_reservations=0, max_budget_reservations=0)
    d = decide(snap(nodes, runs, queued, tier_specs=tiers(free=0.25), config=cfg))
    assert nodes_of(d, 2) == ["n0"]

