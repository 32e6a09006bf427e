"""Tier-affinity packing, whole-GPU floors, reservation budget, bounded preemption loss."""

from __future__ import annotations

from policy_builders import NOW, job, node, nodes_of, placed, running, snap, tiers

from jobs.policy import decide
from jobs.policy.types import PolicyConfig


def test_lower_tier_work_goes_to_nodes_of_its_own_tier() -> None:
    # best fit alone would pick "ent" (fewer free GPUs); affinity keeps free work together
    nodes = [node("ent", 8, free=(6, 7)), node("fr", 8, free=(4, 5, 6, 7)), node("empty", 8)]
    runs = [running(1, {"ent": tuple(range(6))}, tier="enterprise"),
            running(2, {"fr": (0, 1, 2, 3)}, tier="free")]
    d = decide(snap(nodes, runs, [job(1, tier="free", gpus=2)]))
    assert nodes_of(d, 1) == ["fr"]


def test_high_tier_work_stays_together_and_whole_nodes_stay_whole() -> None:
    nodes = [node("fr", 8, free=(7,)), node("ent", 8, free=(4, 5, 6, 7)), node("empty", 8)]
    runs = [running(1, {"fr": tuple(range(7))}, tier="free"),
            running(2, {"ent": (0, 1, 2, 3)}, tier="enterprise")]
    d = decide(snap(nodes, runs, [job(1, tier="enterprise", gpus=1)]))
    assert nodes_of(d, 1) == ["ent"]
    # with no node of its own tier, it falls back to best fit among partly used nodes
    d = decide(snap(nodes, runs[:1] + [running(2, {"ent": (0, 1, 2, 3)}, tier="paid")],
                    [job(1, tier="enterprise", gpus=1)]))
    assert nodes_of(d, 1) == ["fr"]


def test_jobs_placed_this_round_label_their_node() -> None:
    nodes = [node("a", 8), node("b", 8, free=(2, 3, 4, 5, 6, 7))]
    runs = [running(1, {"b": (0, 1)}, tier="enterprise")]
    d = decide(snap(nodes, runs, [job(1, tier="free", gpus=2, wait=10),
                                  job(2, tier="free", gpus=2, wait=5)]))
    # the first free job breaks "a" (no free node exists); the second follows it there
    assert nodes_of(d, 1) == nodes_of(d, 2)


def test_floors_are_whole_gpus() -> None:
    # 2-GPU fleet, free floor 0.1 -> floor(0.2) = 0 GPUs: the free job is not protected
    s = snap([node("n0", 2, free=())], [running(1, {"n0": (0, 1)}, tier="free")],
             [job(7, tier="enterprise", gpus=2, wait=20)], tier_specs=tiers(free=0.1))
    assert [p.attempt_id for p in decide(s).preemptions] == [1]
    # 0.5 of 2 GPUs is one whole GPU: a 2-GPU victim would push free below it
    s.tiers = tiers(free=0.5)
    assert decide(s).preemptions == []


def test_blocked_jobs_past_max_reservations_still_reserve_within_the_budget() -> None:
    nodes = [node(f"n{i}", 8, free=(0, 1, 2, 3)) for i in range(4)]
    runs = [running(i, {f"n{i}": (4, 5, 6, 7)}, tier="paid", ends_in=600 + i) for i in range(4)]
    queued = [job(10 + i, gpus=8, wait=100 - i) for i in range(4)]
    cfg = PolicyConfig(max_reservations=1, reserve_share=0.5)
    d = decide(snap(nodes, runs, queued, config=cfg))
    assert len(d.reservations) == 2  # 16 of 32 GPUs
    d = decide(snap(nodes, runs, queued, config=PolicyConfig(max_reservations=1,
                                                             reserve_share=0.0)))
    assert len(d.reservations) == 1


def test_a_reservation_is_not_delayed_by_lower_tier_backfill() -> None:
    nodes = [node("n0", 8, free=(0, 1, 2, 3))]
    runs = [running(1, {"n0": (4, 5, 6, 7)}, tier="paid", ends_in=600)]
    queued = [job(1, tier="paid", gpus=8, wait=100), job(2, tier="free", gpus=2, limit=3600),
              job(3, tier="free", gpus=2, limit=300)]
    d = decide(snap(nodes, runs, queued))
    assert 2 not in placed(d) and nodes_of(d, 3) == ["n0"]
    assert d.reservations[0].job_id == 1 and d.reservations[0].start_at == NOW + 600


def test_later_kills_in_a_round_must_lose_less_than_the_wait_they_save() -> None:
    nodes = [node(f"n{i}", 8, free=()) for i in range(3)]
    runs = [running(i, {f"n{i}": tuple(range(8))}, ran=1200, ends_in=100 + i * 1000)
            for i in range(3)]
    queued = [job(10 + i, tier="enterprise", gpus=8, wait=20 - i) for i in range(2)]
    d = decide(snap(nodes, runs, queued, config=PolicyConfig(hysteresis_s=30)))
    # the first kill of the round is allowed; the second would lose 8 x 1230 GPU-s to save
    # a wait of 8 x 100 GPU-s (n0 frees at +100 s), so that job waits for its reservation
    assert len(d.preemptions) == 1 and d.pending[11].code == "resources"
    d = decide(snap(nodes, runs, queued,
                    config=PolicyConfig(hysteresis_s=30, preempt_loss_ratio=20.0)))
    assert len(d.preemptions) == 2


def test_late_jobs_go_before_fair_share_when_enabled() -> None:
    nodes = [node("n0", 1)]
    queued = [job(1, org="big", wait=400), job(2, org="small", wait=10)]
    usage = {"big": 1e6}
    d = decide(snap(nodes, queued=queued, usage=usage))
    assert list(placed(d)) == [2]
    d = decide(snap(nodes, queued=queued, usage=usage, config=PolicyConfig(late_fraction=1.0)))
    assert list(placed(d)) == [1]  # waited past its 300 s SLO


def _first_kill_case(ends_in: float, **cfg) -> object:
    """An enterprise gang 20 s into its 30 s SLO; n0 frees up in `ends_in` s, n1 runs a
    job of 3,000 s that ends in an hour: each kill loses about 8 x 3,000 GPU-s."""
    nodes = [node("n0", 8, free=()), node("n1", 8, free=())]
    runs = [running(1, {"n0": tuple(range(8))}, ran=3000, ends_in=ends_in),
            running(2, {"n1": tuple(range(8))}, ran=3000)]
    queued = [job(10, tier="enterprise", gpus=8, wait=20)]
    return decide(snap(nodes, runs, queued, config=PolicyConfig(**cfg)))


def test_a_rounds_first_kill_may_not_lose_far_more_than_the_wait_it_saves() -> None:
    # n0 frees up in 90 s: a kill may lose 16 x 8 x 90 GPU-s, and every one loses more
    d = _first_kill_case(90)
    assert not d.preemptions and d.pending[10].code == "resources"
    # without the bound the gang stops the job that loses least (n1's, not near its end)
    d = _first_kill_case(90, first_kill_loss_ratio=None)
    assert [p.attempt_id for p in d.preemptions] == [2]


def test_the_first_kill_goes_ahead_when_waiting_breaks_the_slo_by_far() -> None:
    # n0 frees up in 400 s, 390 s past the deadline: more than 10 SLOs (300 s) late, so a
    # kill losing more than 4 x 8 x 400 GPU-s goes ahead
    d = _first_kill_case(400, first_kill_loss_ratio=4)
    assert [p.attempt_id for p in d.preemptions] == [2]
    # the same wait within 20 SLOs of the deadline: the bound holds
    d = _first_kill_case(400, first_kill_loss_ratio=4, first_kill_bound_slos=20)
    assert not d.preemptions and d.pending[10].code == "resources"
