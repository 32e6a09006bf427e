"""The Jain index of GPU share across a tier's orgs, on runs small enough to compute by hand."""

import pytest

from jobs.policy.fifo import decide as fifo_decide
from jobs.sim import Simulator
from jobs.sim.metrics import summarize
from jobs.sim.model import NodeSpec, SimJob


def gang(i: int, org: str, submit: float, gpus: int, dur: float) -> SimJob:
    return SimJob(i, org, "free", gpus, submit, dur, time_limit=10 * dur)


def run(jobs: list[SimJob]) -> dict:
    return summarize(Simulator([NodeSpec("n0", 8)], jobs, fifo_decide).run())


def test_a_split_that_follows_the_fair_one_scores_one():
    # a and b run 4 GPUs each and each has 4 more waiting: each holds its fair half
    fig = run([gang(1, "a", 0, 4, 100), gang(2, "b", 0, 4, 100), gang(3, "a", 0, 4, 100),
               gang(4, "b", 0, 4, 100), gang(5, "late", 100, 1, 10)])
    assert fig["per_org"]["a"]["fair_ratio"] == pytest.approx(1.0)
    assert fig["per_org"]["b"]["fair_ratio_while_waiting"] == pytest.approx(1.0)
    assert fig["jain_by_tier"]["free"] == pytest.approx(1.0)
    assert fig["jain_while_waiting_by_tier"]["free"] == pytest.approx(1.0)


def test_an_org_is_credited_for_its_gang_while_the_tier_contends():
    # one node; a, b and c each submit one 8-GPU gang at 0; fifo runs a [0, 100), then b
    # [100, 200), then c; the window ends at d's arrival (200). The tier contends throughout
    # (c waits): fair split 8/3 each over [0, 100), 4 each (b, c) over [100, 200).
    fig = run([gang(1, "a", 0, 8, 100), gang(2, "b", 0, 8, 100), gang(3, "c", 0, 8, 300),
               gang(4, "d", 200, 8, 10)])
    orgs = fig["per_org"]
    assert "fair_ratio" not in orgs["a"]  # never waited: outside the index
    assert orgs["b"]["fair_ratio"] == pytest.approx(800 / (100 * 8 / 3 + 100 * 4))
    assert orgs["c"]["fair_ratio"] == 0.0
    # while b itself waited it held nothing, as any policy's would: x = 0
    assert orgs["b"]["fair_ratio_while_waiting"] == 0.0
    x = orgs["b"]["fair_ratio"]
    assert fig["jain_by_tier"]["free"] == pytest.approx(x * x / (2 * x * x))
