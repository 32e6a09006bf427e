"""A maintenance in the simulator: what a window, a drain and no notice do with the same
nodes going down at the same hour (bench/maintenance.py compares them on a trace)."""

import pytest

from jobs.policy.fifo import decide as fifo_decide
from jobs.sim import Simulator
from jobs.sim.metrics import summarize
from jobs.sim.model import Maintenance, NodeSpec, SimJob


def _run(mode: str, notice: float = 100.0) -> tuple[dict[int, SimJob], dict]:
    """n0 goes down at 100 s for 50 s, known from 100 - `notice`; a 200 s job (limit
    2,000 s) and a 50 s one (limit 80 s) arrive at 0; first fit puts the first on n0 where it
    may."""
    fleet = [NodeSpec("n0", 1), NodeSpec("n1", 1)]
    jobs = [SimJob(1, "o", "free", 1, 0.0, 200.0, time_limit=2000.0),
            SimJob(2, "o", "free", 1, 0.0, 50.0, time_limit=80.0)]
    res = Simulator(fleet, jobs, fifo_decide,
                    maintenance=Maintenance(("n0",), 100.0, 50.0, notice, mode)).run()
    return {j.job_id: j for j in res.jobs}, summarize(res)


def test_a_window_keeps_the_long_job_off_the_node_and_lends_it_to_the_short_one() -> None:
    jobs, fig = _run("window")
    assert (jobs[1].first_start, jobs[1].end) == (0.0, 200.0)  # on n1
    assert (jobs[2].first_start, jobs[2].end) == (0.0, 50.0)  # on n0, done before the hour
    assert fig["maintenance_stopped"] == 0 and fig["maintenance_lost_gpu_hours"] == 0
    assert fig["maintenance_idle_gpu_hours"] * 3600 == pytest.approx(50.0)  # n0, 50 to 100


def test_a_drain_idles_the_node_from_the_notice() -> None:
    jobs, fig = _run("drain")
    assert jobs[1].first_start == 0.0
    assert jobs[2].first_start == 150.0  # n1 is busy till 200; n0 is back at 150
    assert fig["maintenance_stopped"] == 0
    assert fig["maintenance_idle_gpu_hours"] * 3600 == pytest.approx(100.0)


def test_without_notice_the_node_goes_down_with_what_runs_there() -> None:
    jobs, fig = _run("none")
    assert fig["maintenance_stopped"] == 1 and jobs[1].failures == 1
    assert fig["maintenance_lost_gpu_hours"] * 3600 == pytest.approx(100.0)
    assert fig["failure_lost_gpu_hours"] == 0 and fig["node_failures"] == 0
    assert fig["maintenance_idle_gpu_hours"] == 0
    # it retries after its 5 s backoff on n1, free since job 2 ended at 50
    assert jobs[1].end == pytest.approx(105.0 + 200.0)


def test_a_window_evacuates_what_started_before_its_notice_and_spends_no_retry() -> None:
    jobs, fig = _run("window", notice=50.0)  # announced at 50: job 1 has run on n0 since 0
    assert fig["maintenance_stopped"] == 1 and jobs[1].failures == 0
    assert jobs[1].preemptions == 1 and fig["preemptions"] == 0  # not the policy's
    assert fig["maintenance_lost_gpu_hours"] * 3600 == pytest.approx(100.0)
    assert jobs[1].end == pytest.approx(100.0 + 200.0)  # again at once on n1, no backoff
