"""The ideal pool behind bench/ideal_bound.py: floors, higher tiers and orders."""

from jobs.sim.ideal import ideal_waits
from jobs.sim.model import SimJob

PRIORITY = {"enterprise": 3, "paid": 2, "free": 1}


def job(i: int, tier: str, gpus: int, submit: float, dur: float) -> SimJob:
    return SimJob(i, f"o{i}", tier, gpus, submit, dur, time_limit=2 * dur)


def waits(jobs, floors=None, order="arrival") -> list[float]:
    floors = floors or {"enterprise": 0.0, "paid": 0.0, "free": 0.0}
    return ideal_waits(jobs, "paid", 8, floors, PRIORITY, order)


def test_a_higher_tier_is_served_first_and_the_tier_waits_for_its_end():
    jobs = [job(0, "enterprise", 8, 0, 100), job(1, "paid", 4, 10, 50)]
    assert waits(jobs) == [90]


def test_a_higher_tier_never_takes_the_tiers_own_floor():
    jobs = [job(0, "enterprise", 8, 0, 100), job(1, "paid", 4, 10, 50)]
    assert waits(jobs, {"enterprise": 0.0, "paid": 0.5, "free": 0.0}) == [0]


def test_a_lower_tier_keeps_its_floor_only_while_it_has_that_much_work():
    floors = {"enterprise": 0.0, "paid": 0.0, "free": 0.25}
    busy = [job(0, "free", 8, 0, 1000), job(1, "paid", 8, 10, 50)]
    assert waits(busy, floors) == [990]  # free holds 2 of 8 GPUs until its work ends
    small = [job(0, "free", 1, 0, 1000), job(1, "paid", 7, 10, 50)]
    assert waits(small, floors) == [0]  # free holds only the 1 GPU it uses


def test_arrival_order_backfills_and_smallest_first_reorders():
    jobs = [job(0, "paid", 8, 0, 100), job(1, "paid", 8, 1, 500), job(2, "paid", 8, 2, 10)]
    assert waits(jobs) == [0, 99, 598]
    assert waits(jobs, order="smallest") == [0, 98, 109]


def test_fair_order_serves_the_org_that_ran_least_first():
    heavy = [SimJob(i, "heavy", "paid", 8, i, 100, time_limit=200) for i in range(2)]
    light = SimJob(9, "light", "paid", 8, 50, 100, time_limit=200)
    # heavy's first job runs 0-100; at 100 both wait: arrival serves heavy's older job first
    assert waits([*heavy, light]) == [0, 99, 150]
    assert waits([*heavy, light], order="fair") == [0, 50, 199]
