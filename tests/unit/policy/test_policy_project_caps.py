"""A project's running-GPU cap inside its organization: its jobs past it wait, say so, and
leave the walk so that the round goes on to everyone else's, however many they are."""

from policy_builders import job, node, placed, running, snap

from jobs.policy import decide
from jobs.policy.types import PolicyConfig

CAP = {("a", "render"): 4}


def test_a_project_runs_up_to_its_cap_and_the_rest_of_its_org_goes_on() -> None:
    queued = [job(1, gpus=2, project="render"), job(2, gpus=2, project="render"),
              job(3, gpus=2, project="render"), job(4, gpus=2, project="train")]
    d = decide(snap([node("n0", 8)], queued=queued, project_gpu_caps=CAP))
    assert sorted(placed(d)) == [1, 2, 4]
    assert d.pending[3].code == "project_cap"
    assert d.pending[3].text == "project render of a is at its running-GPU cap (4)"


def test_its_running_work_counts() -> None:
    runs = [running(1, {"n0": (0, 1, 2, 3)}, tier="paid", org="a", project="render")]
    queued = [job(1, gpus=1, project="render"), job(2, gpus=1, project="train")]
    d = decide(snap([node("n0", 8, free=(4, 5, 6, 7))], runs, queued, project_gpu_caps=CAP))
    assert list(placed(d)) == [2] and d.pending[1].code == "project_cap"


def test_a_job_too_large_for_the_room_left_waits_while_smaller_ones_fill_it() -> None:
    queued = [job(1, gpus=2, project="render", wait=20.0),
              job(2, gpus=4, project="render", wait=10.0),
              job(3, gpus=2, project="render")]
    d = decide(snap([node("n0", 8)], queued=queued, project_gpu_caps=CAP))
    assert sorted(placed(d)) == [1, 3] and d.pending[2].code == "project_cap"


def test_a_full_project_leaves_the_walk_and_its_tail_shares_the_reason() -> None:
    """50,000 jobs of a project at its cap of 0 cost the walk one look: with a depth of one
    job past a blocked one, the other org's job still starts."""
    queued = [job(i, gpus=1, project="render", wait=100.0) for i in range(50_000)]
    queued.append(job(60_000, org="b", gpus=1))
    cfg = PolicyConfig(backfill_depth=1)
    d = decide(snap([node("n0", 8)], queued=queued, config=cfg,
                    project_gpu_caps={("a", "render"): 0}))
    assert list(placed(d)) == [60_000]
    assert {d.pending[i].code for i in range(50_000)} == {"project_cap"}
    # one job looked at, the others answered together, unread
    assert len(d.pending.own) == 1
    assert sum(len(ids) for ids, _ in d.pending.runs()) == 49_999


def test_an_org_cap_below_the_projects_is_the_one_that_holds() -> None:
    queued = [job(i, gpus=2, project="render") for i in range(3)]
    d = decide(snap([node("n0", 8)], queued=queued, org_gpu_caps={"a": 2},
                    project_gpu_caps=CAP))
    assert len(placed(d)) == 1
    assert {r.code for r in d.pending.values()} == {"org_cap"}


def test_a_capped_project_asks_no_capacity() -> None:
    """Its late jobs are not a shortage of GPUs: capacity advice leaves them out."""
    queued = [job(i, gpus=8, project="render", wait=10_000.0) for i in range(3)]
    d = decide(snap([node("n0", 8)], queued=queued, project_gpu_caps={("a", "render"): 0}))
    assert not d.placements and d.capacity_advice == {}
