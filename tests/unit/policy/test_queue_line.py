"""Queue positions (line.py): the line a fair-share walk serves, one start at a time."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from policy_builders import job, node, running, snap, tiers
from policy_strategies import COMMON, contention, snapshots

from jobs.policy import decide
from jobs.policy.line import start_order as line_of
from jobs.policy.queues import tier_floors
from jobs.policy.ranking import RankedQueue
from jobs.policy.shares import Shares
from jobs.policy.types import Snapshot


def start_order(snap: Snapshot) -> list[int]:
    return [job.job_id for job in line_of(snap)]


def test_a_light_org_goes_second_behind_a_heavy_org_of_many_jobs() -> None:
    queued = [job(i, org="big", wait=1000 - i) for i in range(5)] + [job(50, org="small")]
    assert start_order(snap([node("n0")], queued=queued)) == [0, 50, 1, 2, 3, 4]


def test_each_start_moves_its_org_back_by_the_gpus_it_takes() -> None:
    # a's 4-GPU job counts as four of b's 1-GPU jobs before a comes round again
    queued = [job(1, org="a", gpus=4, wait=60), job(2, org="a", wait=50)] + [
        job(10 + i, org="b", wait=40 - i) for i in range(5)]
    assert start_order(snap([node("n0")], queued=queued)) == [1, 10, 11, 12, 13, 2, 14]


def test_higher_tiers_first_and_a_tier_below_its_floor_before_them() -> None:
    queued = [job(1, "free", wait=500), job(2, "paid", wait=100), job(3, "enterprise")]
    assert start_order(snap([node("n0", 4)], queued=queued)) == [3, 2, 1]
    runs = [running(1, {"n0": (0, 1, 2)}, tier="paid")]
    order = start_order(snap([node("n0", 4, free=(3,))], runs, queued,
                             tier_specs=tiers(free=0.25)))
    assert order == [1, 3, 2]


def test_decayed_usage_orders_orgs() -> None:
    queued = [job(1, org="heavy", wait=900), job(2, org="light")]
    order = start_order(snap([node("n0")], queued=queued, usage={"heavy": 1e6, "light": 1e3}))
    assert order == [2, 1]


def test_every_queued_job_once_and_unknown_tiers_last() -> None:
    rng = random.Random(3)
    queued = [job(i, rng.choice(["enterprise", "paid", "free", "gold"]),
                  org=f"o{rng.randrange(6)}", gpus=rng.choice([1, 2, 4, 8]),
                  wait=rng.uniform(0, 3600)) for i in range(300)]
    order = start_order(snap([node(f"n{i}") for i in range(4)], queued=queued))
    assert sorted(order) == sorted(j.job_id for j in queued)
    unknown = {j.job_id for j in queued if j.tier == "gold"}
    assert set(order[-len(unknown):]) == unknown


def test_the_line_is_the_order_a_round_starts_jobs_in_where_all_fit() -> None:
    rng = random.Random(7)
    queued = [job(i, rng.choice(["enterprise", "paid", "free"]), org=f"o{rng.randrange(5)}",
                  gpus=rng.choice([1, 2, 4, 8]), wait=rng.uniform(0, 600),
                  project=f"p{rng.randrange(2)}", user=f"u{rng.randrange(3)}")
              for i in range(60)]
    fleet = [node(f"n{i}") for i in range(60)]  # room for every job
    runs = [running(1, {"n0": (0, 1)}, tier="paid", org="o1")]
    s = snap(fleet, runs, queued, usage={"o2": 5e4, "o3": 2e3})
    assert [p.job_id for p in decide(s).placements] == start_order(s)


@COMMON
@given(st.one_of(snapshots(), contention()))
def test_every_queued_job_has_one_place_in_line(s: Snapshot) -> None:
    line = start_order(s)
    assert sorted(line) == sorted(j.job_id for j in s.queued)
    # the line starts where a round's walk does: with the ranking's first job
    first = RankedQueue(s, Shares.of(s.running), tier_floors(s.tiers, s.fleet_gpus())).pop()
    if first is not None:
        assert line[0] == first.job_id
