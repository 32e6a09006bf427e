"""The starvation bound (DESIGN.md invariant 6) over a replay, with reservations kept."""

from jobs.policy import decide
from jobs.policy.types import PolicyConfig
from jobs.sim import Simulator
from jobs.sim.model import NodeSpec, SimJob

STARVE_AFTER = 3600.0
LIGHT_RUN = 600.0


def paid(i: int, org: str, submit: float, dur: float, gpus: int = 1) -> SimJob:
    return SimJob(i, org, "paid", gpus, submit, dur, time_limit=2 * dur, expected_duration=dur)


def test_a_starving_gang_starts_within_one_drain_of_starving():
    # "heavy" runs a long 3-GPU job on n1, so by fair share it always ranks below "light",
    # whose one-GPU jobs arrive faster than n0's two GPUs run them (each waits past its start
    # SLO, never as long as STARVE_AFTER) and keep their reservation on n0. One reservation a
    # round: a kept one spends it before the walk, where the starving 2-GPU job goes first.
    fleet = [NodeSpec("n0", 2), NodeSpec("n1", 3)]
    long_job = paid(1, "heavy", 0.0, 20 * 3600.0, gpus=3)
    gang = paid(4, "heavy", 2000.0, 60.0, gpus=2)
    light = [paid(100 + i, "light", 5.0 + 240.0 * i, LIGHT_RUN) for i in range(45)]
    config = PolicyConfig(starve_after_s=STARVE_AFTER, max_reservations=1,
                          max_budget_reservations=1)
    by = {j.job_id: j for j in Simulator(fleet, [long_job, gang, *light], decide,
                                         config=config, max_time=8 * 3600.0).run().jobs}
    start = by[4].first_start
    assert start is not None
    assert any((j.first_start or 1e9) > start for j in light), "light still had jobs queued"
    assert all(j.first_start - j.submit < STARVE_AFTER for j in light)
    # once starving it reserves n0 first, and n0 drains within one light run
    assert start - gang.submit <= STARVE_AFTER + LIGHT_RUN
