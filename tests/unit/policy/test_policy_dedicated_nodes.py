"""Nodes dedicated to an organization: only its jobs start there, and they fill its own nodes
before they take shared GPUs from others. The property that no policy breaks a dedication
on random fleets is in test_policy_properties.py; these are the cases an operator reads the
docs for."""

from __future__ import annotations

from policy_builders import NOW, job, node, nodes_of, placed, running, snap

from jobs.policy import POLICIES, decide


def test_only_its_organizations_jobs_start_on_a_dedicated_node() -> None:
    nodes = [node("acme1", 8, owner="acme")]
    d = decide(snap(nodes, queued=[job(1, org="other", wait=600.0), job(2, org="acme")]))
    assert nodes_of(d, 2) == ["acme1"] and 1 not in placed(d)
    reason = d.pending[1]
    assert reason.code == "dedicated"
    assert "dedicated to other organizations" in reason.text


def test_the_owner_fills_its_own_nodes_before_shared_ones() -> None:
    # best fit alone would take the shared node's last free GPU
    nodes = [node("shared", 8, free=(7,)), node("acme1", 8, owner="acme")]
    for name, decide_with in POLICIES.items():
        d = decide_with(snap(nodes, queued=[job(1, org="acme")]))
        if name == "gpusched":
            assert nodes_of(d, 1) == ["acme1"]
        else:  # the baselines honour the dedication, not the preference
            assert placed(d)
    d = decide(snap(nodes, queued=[job(1, org="other")]))
    assert nodes_of(d, 1) == ["shared"]


def test_others_neither_reserve_nor_preempt_on_a_dedicated_node() -> None:
    nodes = [node("acme1", 8, free=(), owner="acme"), node("shared", 8, free=())]
    runs = [running(1, {"acme1": tuple(range(8))}, tier="free", org="acme", ends_in=60.0),
            running(2, {"shared": tuple(range(8))}, tier="free", org="z", ends_in=7200.0)]
    d = decide(snap(nodes, runs, [job(1, tier="enterprise", org="other", gpus=8)]))
    freed = {a.node for p in d.placements for a in p.allocations}
    held = {a.node for r in d.reservations for a in r.allocations}
    assert "acme1" not in freed | held
    assert {p.attempt_id for p in d.preemptions} <= {2}


def test_a_shared_node_takes_the_owners_jobs_once_its_own_are_full() -> None:
    nodes = [node("acme1", 4, owner="acme"), node("shared", 8)]
    d = decide(snap(nodes, queued=[job(1, org="acme", gpus=4), job(2, org="acme", gpus=4,
                                                                   wait=-1)]))
    assert nodes_of(d, 1) == ["acme1"] and nodes_of(d, 2) == ["shared"]


def test_a_node_dedicated_from_a_time_ahead_holds_others_to_it_and_not_its_owner() -> None:
    hour = 3600.0
    nodes = [node("soon", 8, until=NOW + hour, upcoming="acme")]
    d = decide(snap(nodes, queued=[job(1, org="other", limit=2 * hour),
                                   job(2, org="other", limit=0.5 * hour, wait=-1)]))
    assert nodes_of(d, 2) == ["soon"] and 1 not in placed(d)
    assert d.pending[1].code == "dedicated" and "by " in d.pending[1].text
    for name, decide_with in POLICIES.items():  # its coming owner runs past the window
        d = decide_with(snap(nodes, queued=[job(3, org="acme", limit=2 * hour)]))
        assert [a.node for a in placed(d)[3]] == ["soon"], name
