"""A member's running-GPU cap inside their organization, over all its projects: their jobs
past it wait, say so, and leave the walk so that the round goes on to everyone else's,
however many they are; their colleagues' jobs in the same projects go on."""

from policy_builders import job, node, placed, running, snap

from jobs.policy import decide
from jobs.policy.types import PolicyConfig

CAP = {("a", "17"): 4}


def test_a_member_runs_up_to_their_cap_over_all_projects_and_colleagues_go_on() -> None:
    queued = [job(1, gpus=2, project="render", user="17"),
              job(2, gpus=2, project="train", user="17"),
              job(3, gpus=2, project="render", user="17"),
              job(4, gpus=2, project="render", user="18")]
    d = decide(snap([node("n0", 8)], queued=queued, user_gpu_caps=CAP))
    assert sorted(placed(d)) == [1, 2, 4]
    assert d.pending[3].code == "user_cap"
    assert d.pending[3].text == "its submitter (user 17) is at their running-GPU cap in a (4)"


def test_their_running_work_counts_in_any_project() -> None:
    runs = [running(1, {"n0": (0, 1, 2, 3)}, tier="paid", org="a", project="train",
                    user="17")]
    queued = [job(1, gpus=1, project="render", user="17"),
              job(2, gpus=1, project="render", user="18")]
    d = decide(snap([node("n0", 8, free=(4, 5, 6, 7))], runs, queued, user_gpu_caps=CAP))
    assert list(placed(d)) == [2] and d.pending[1].code == "user_cap"


def test_the_same_id_in_another_org_is_another_member() -> None:
    queued = [job(1, gpus=4, org="a", user="17"), job(2, gpus=4, org="b", user="17")]
    d = decide(snap([node("n0", 8)], queued=queued, user_gpu_caps={("a", "17"): 0}))
    assert list(placed(d)) == [2] and d.pending[1].code == "user_cap"


def test_a_full_member_leaves_the_walk_and_their_tail_shares_the_reason() -> None:
    """50,000 jobs of a member at a cap of 0, in two projects, cost the walk one look: with
    a depth of one job past a blocked one, a colleague's job still starts."""
    queued = [job(i, gpus=1, project=("render", "train")[i % 2], user="17", wait=100.0)
              for i in range(50_000)]
    queued.append(job(60_000, gpus=1, project="render", user="18"))
    cfg = PolicyConfig(backfill_depth=1)
    d = decide(snap([node("n0", 8)], queued=queued, config=cfg,
                    user_gpu_caps={("a", "17"): 0}))
    assert list(placed(d)) == [60_000]
    assert {d.pending[i].code for i in range(50_000)} == {"user_cap"}
    assert len(d.pending.own) == 1  # one job looked at, the others answered together
    assert sum(len(ids) for ids, _ in d.pending.runs()) == 49_999


def test_a_project_cap_below_the_members_is_the_one_that_holds() -> None:
    queued = [job(i, gpus=2, project="render", user="17") for i in range(3)]
    d = decide(snap([node("n0", 8)], queued=queued, user_gpu_caps=CAP,
                    project_gpu_caps={("a", "render"): 2}))
    assert len(placed(d)) == 1
    assert {r.code for r in d.pending.values()} == {"project_cap"}


def test_a_capped_member_asks_no_capacity() -> None:
    """Their late jobs are not a shortage of GPUs: capacity advice leaves them out."""
    queued = [job(i, gpus=8, user="17", wait=10_000.0) for i in range(3)]
    d = decide(snap([node("n0", 8)], queued=queued, user_gpu_caps={("a", "17"): 0}))
    assert not d.placements and d.capacity_advice == {}
