"""Rank order: tiers, floors, fair share across orgs, projects and users, aging."""

from __future__ import annotations

from policy_builders import job, node, placed, running, snap, tiers

from jobs.policy import decide
from jobs.policy.types import PolicyConfig, TierSpec


def one_gpu_free():
    return [node("n0", 1)]


def test_higher_tier_goes_first() -> None:
    d = decide(snap(one_gpu_free(), queued=[job(1, tier="free", wait=50), job(2, "enterprise")]))
    assert list(placed(d)) == [2]
    assert d.pending[1].code == "resources"


def test_tier_below_its_floor_goes_before_higher_tiers() -> None:
    nodes = [node("n0", 4, free=(3,))]
    runs = [running(1, {"n0": (0, 1, 2)}, tier="paid")]
    d = decide(snap(nodes, runs, [job(1, "paid"), job(2, "free")], tier_specs=tiers(free=0.25)))
    assert list(placed(d)) == [2]


def test_an_org_with_many_queued_jobs_cannot_hold_its_tier() -> None:
    queued = [job(i, org="big", wait=1000 - i) for i in range(100)] + [job(500, org="small")]
    d = decide(snap([node("n0", 2)], queued=queued))
    assert sorted(placed(d)) == [0, 500]


def test_running_gpus_count_in_the_share() -> None:
    nodes = [node("n0", 4, free=(3,))]
    runs = [running(1, {"n0": (0, 1, 2)}, tier="paid", org="busy")]
    d = decide(snap(nodes, runs, [job(1, org="busy", wait=900), job(2, org="idle")]))
    assert list(placed(d)) == [2]


def test_decayed_usage_and_org_weights_order_orgs() -> None:
    queued = [job(1, org="heavy", wait=900), job(2, org="light")]
    d = decide(snap(one_gpu_free(), queued=queued, usage={"heavy": 1e6, "light": 1e3}))
    assert list(placed(d)) == [2]
    d = decide(snap(one_gpu_free(), queued=queued, usage={"heavy": 1e6, "light": 1e3},
                    org_weights={"heavy": 10_000.0}))
    assert list(placed(d)) == [1]


def test_projects_inside_an_org_share_fairly() -> None:
    queued = [job(i, project="p", wait=100 - i) for i in range(5)] + [job(9, project="q")]
    d = decide(snap([node("n0", 2)], queued=queued, project_usage={("a", "p"): 50.0}))
    assert sorted(placed(d)) == [0, 9]


def test_a_user_with_many_queued_jobs_cannot_hold_the_project() -> None:
    queued = [job(i, user="bulk", wait=1000 - i) for i in range(40)]
    queued += [job(100 + i, user="one", wait=10 - i) for i in range(2)]
    d = decide(snap([node("n0", 4)], queued=queued))
    assert sorted(placed(d)) == [0, 1, 100, 101]


def test_users_of_a_project_go_by_decayed_usage_and_running_gpus() -> None:
    queued = [job(1, user="u", wait=900), job(2, user="v")]
    d = decide(snap(one_gpu_free(), queued=queued, user_usage={("a", "", "u"): 1e6}))
    assert list(placed(d)) == [2]
    runs = [running(1, {"n1": (0, 1)}, tier="paid", org="a", user="v")]
    d = decide(snap(one_gpu_free() + [node("n1", 2, free=())], runs, queued))
    assert list(placed(d)) == [1]


def test_a_users_share_inside_one_project_leaves_other_projects_alone() -> None:
    queued = [job(i, project="p", user="u", wait=100 - i) for i in range(5)]
    queued += [job(50, project="q", user="u"), job(60, project="p", user="v")]
    d = decide(snap([node("n0", 3)], queued=queued, user_usage={("a", "p", "u"): 1e6}))
    assert sorted(placed(d)) == [0, 50, 60]


def test_oldest_first_inside_a_project_among_equal_limits() -> None:
    d = decide(snap(one_gpu_free(), queued=[job(1, wait=10), job(2, wait=99), job(3, wait=50)]))
    assert list(placed(d)) == [2]


def test_shorter_limit_first_inside_a_project() -> None:
    long, short = job(1, wait=600, limit=3600), job(2, wait=0, limit=600)
    assert list(placed(decide(snap(one_gpu_free(), queued=[long, short])))) == [2]
    fifo = PolicyConfig(limit_weight=0.0)
    assert list(placed(decide(snap(one_gpu_free(), queued=[long, short], config=fifo)))) == [1]


def test_no_job_submitted_after_a_jobs_virtual_deadline_overtakes_it() -> None:
    weight = PolicyConfig().limit_weight
    long = job(1, wait=weight * 3600 + 1, limit=3600)  # its virtual deadline just passed
    shortest = job(2, wait=0, limit=1)
    assert list(placed(decide(snap(one_gpu_free(), queued=[shortest, long])))) == [1]


def test_aging_bound_a_free_job_outranks_fresh_enterprise_after_its_bound() -> None:
    cfg = PolicyConfig(tier_gap=8.0, aging_per_hour=1.0)
    bound_h = (2 - 0) * cfg.tier_gap / cfg.aging_per_hour  # (L_max - L_free) * G / a
    late = job(1, "free", wait=bound_h * 3600 + 60)
    early = job(1, "free", wait=bound_h * 3600 - 60)
    fresh = job(2, "enterprise")
    assert list(placed(decide(snap(one_gpu_free(), queued=[late, fresh], config=cfg)))) == [1]
    assert list(placed(decide(snap(one_gpu_free(), queued=[early, fresh], config=cfg)))) == [2]


def test_age_boost_is_capped() -> None:
    cfg = PolicyConfig(max_age_boost=4.0)
    ancient = job(1, "free", wait=1e7)
    d = decide(snap(one_gpu_free(), queued=[ancient, job(2, "enterprise")], config=cfg))
    assert list(placed(d)) == [2]


def test_org_cap_limits_running_gpus() -> None:
    nodes = [node("n0", 8)]
    runs = []
    queued = [job(1, org="a", gpus=4), job(2, org="a", gpus=4), job(3, org="b", gpus=2)]
    d = decide(snap(nodes, runs, queued, org_gpu_caps={"a": 6}))
    assert sorted(placed(d)) == [1, 3]
    assert d.pending[2].code == "org_cap" and "(6)" in d.pending[2].text


def test_tier_ceiling_stops_bursting() -> None:
    t = tiers()
    t["free"] = t["free"].__class__("free", 1, max_share=0.5)
    d = decide(snap([node("n0", 8)], queued=[job(i, "free", gpus=2) for i in range(4)],
                    tier_specs=t))
    assert len(d.placements) == 2
    assert {r.code for r in d.pending.values()} == {"tier_ceiling"}


def test_starving_jobs_go_first_in_their_tier_oldest_first() -> None:
    queued = [job(1, org="heavy", wait=5000), job(2, org="heavy2", wait=7200),
              job(3, org="light", wait=10), job(4, org="heavy", wait=3000)]
    usage = {"heavy": 1e7, "heavy2": 1e7}
    d = decide(snap([node("n0", 2)], queued=queued, usage=usage))
    assert list(placed(d))[0] == 3  # fair share alone: the light org first
    guard = PolicyConfig(starve_after_s=3600)
    # every starving job goes before fair share, the oldest first; job 4 is not starving
    d = decide(snap([node("n0", 2)], queued=queued, usage=usage, config=guard))
    assert list(placed(d)) == [2, 1]
    d = decide(snap([node("n0", 1)], queued=queued, usage=usage, config=guard))
    assert list(placed(d)) == [2]


def test_projects_share_their_org_by_weight() -> None:
    queued = [job(i, project="heavy" if i % 2 else "light", wait=100 - i) for i in range(40)]
    d = decide(snap([node("n0", 8)], queued=queued,
                    project_weights={("a", "heavy"): 3.0, ("a", "light"): 1.0}))
    by_project = [queued[i].project for i in placed(d)]
    assert sorted(by_project) == ["heavy"] * 6 + ["light"] * 2


def test_users_share_a_project_by_their_weight_in_the_org() -> None:
    queued = [job(i, user="lead" if i % 2 else "intern", wait=100 - i) for i in range(40)]
    d = decide(snap([node("n0", 8)], queued=queued,
                    user_weights={("a", "lead"): 3.0}))
    by_user = [queued[i].user for i in placed(d)]
    assert sorted(by_user) == ["intern"] * 2 + ["lead"] * 6


def test_tiers_of_one_priority_share_by_weight() -> None:
    specs = {"gold": TierSpec("gold", 2, 3.0, 0.0, 1.0, 300.0),
             "silver": TierSpec("silver", 2, 1.0, 0.0, 1.0, 300.0),
             "free": TierSpec("free", 1, 1.0, 0.0, 1.0, 3600.0)}
    queued = [job(i, tier=("silver", "gold", "free")[i % 3], org=f"o{i % 3}", wait=500 - i)
              for i in range(60)]
    d = decide(snap([node("n0", 8)], queued=queued, tier_specs=specs))
    by_tier = sorted(queued[i].tier for i in placed(d))
    assert by_tier == ["gold"] * 6 + ["silver"] * 2


def test_by_default_a_job_waiting_twelve_hours_goes_first_in_its_tier() -> None:
    usage = {"heavy": 1e9}
    for waited_h, first in ((11.9, 2), (12.1, 1)):
        queued = [job(1, org="heavy", wait=waited_h * 3600), job(2, org="light")]
        d = decide(snap(one_gpu_free(), queued=queued, usage=usage))
        assert list(placed(d)) == [first]


def test_a_starving_job_behind_another_users_first_job_still_goes_first() -> None:
    # the project's first job by virtual deadline is user u's fresh one; user v's job, older
    # than 12 h, heads only v's list: it is the tier's oldest head all the same
    queued = [job(1, org="heavy", user="u", limit=60.0),
              job(2, org="heavy", user="v", wait=13 * 3600, limit=14 * 3600),
              job(3, org="light")]
    d = decide(snap(one_gpu_free(), queued=queued, usage={"heavy": 1e9}))
    assert list(placed(d)) == [2]
    assert {1, 3} <= set(d.pending)
