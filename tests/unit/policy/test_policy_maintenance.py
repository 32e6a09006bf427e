"""Maintenance windows: a node that leaves service at `until` takes only jobs that end by then.

The property that no policy breaks a window on random fleets is in
test_policy_properties.py; these are the cases an operator reads the docs for.
"""

from __future__ import annotations

import math

from policy_builders import NOW, job, node, nodes_of, placed, running, snap, tiers

from jobs.policy import POLICIES, decide
from jobs.policy.types import PolicyConfig

HOUR = 3600.0


def test_a_node_going_into_maintenance_takes_the_jobs_that_end_before_it() -> None:
    nodes = [node("soon", 8, until=NOW + HOUR)]
    d = decide(snap(nodes, queued=[job(1, limit=2 * HOUR), job(2, limit=HOUR, wait=-1)]))
    assert nodes_of(d, 2) == ["soon"] and 1 not in placed(d)
    reason = d.pending[1]
    assert reason.code == "maintenance"
    assert "maintenance by" in reason.text and "(in 60 min)" in reason.text


def test_the_reason_names_the_window_where_the_other_nodes_are_too_small() -> None:
    nodes = [node("soon", 8, until=NOW + HOUR), node("small", 1, island="")]
    d = decide(snap(nodes, queued=[job(1, gpus=2, limit=2 * HOUR)]))
    assert not d.placements and d.pending[1].code == "maintenance"
    d = decide(snap(nodes, queued=[job(1, gpus=16, limit=600.0)]))  # no window in its way
    assert d.pending[1].code == "no_fit"


def test_a_long_job_goes_to_a_node_with_no_window_and_reserves_only_such_nodes() -> None:
    nodes = [node("soon", 8, until=NOW + HOUR), node("busy", 8, free=())]
    runs = [running(1, {"busy": tuple(range(8))}, ends_in=600.0)]
    d = decide(snap(nodes, runs, [job(1, gpus=8, limit=4 * HOUR)]))
    assert 1 not in placed(d)
    assert d.pending[1].code == "resources"
    assert [a.node for r in d.reservations for a in r.allocations] == ["busy"]
    # with room on the node without a window, it starts there and leaves the other for short jobs
    d = decide(snap([node("soon", 8, until=NOW + HOUR), node("free", 8)],
                    queued=[job(1, gpus=8, limit=4 * HOUR), job(2, gpus=8, limit=600.0,
                                                                   wait=-1)]))
    assert nodes_of(d, 1) == ["free"] and nodes_of(d, 2) == ["soon"]


def test_a_reservation_never_waits_on_a_node_going_into_maintenance() -> None:
    """The job would end before the window if it started now, but the node's GPUs free up
    too late for that: it reserves the node without a window, later as that is."""
    nodes = [node("soon", 8, free=(), until=NOW + HOUR), node("later", 8, free=())]
    runs = [running(1, {"soon": tuple(range(8))}, ends_in=3000.0),
            running(2, {"later": tuple(range(8))}, ends_in=2 * HOUR)]
    d = decide(snap(nodes, runs, [job(1, gpus=8, limit=1800.0)]))
    assert [a.node for r in d.reservations for a in r.allocations] == ["later"]


def test_once_the_window_begins_the_node_starts_nothing() -> None:
    d = decide(snap([node("down", 8, until=NOW - 1.0)], queued=[job(1, limit=60.0)]))
    assert not d.placements and d.pending[1].code == "maintenance"


def test_no_preemption_frees_gpus_on_a_node_going_into_maintenance() -> None:
    """Enterprise is past its start SLO and free work fills both nodes: the victims come from
    the node without a window, whatever they cost."""
    nodes = [node("soon", 8, free=(), until=NOW + 2 * HOUR), node("n", 8, free=())]
    runs = [running(1, {"soon": tuple(range(8))}, ran=60.0, checkpointable=True,
                    last_checkpoint_at=NOW - 1.0),  # cheap to stop: nothing lost
            running(2, {"n": tuple(range(8))}, ran=3000.0)]
    d = decide(snap(nodes, runs, [job(1, tier="enterprise", gpus=8, wait=600.0, limit=HOUR)],
                    tiers(enterprise=0.5)))
    assert [p.attempt_id for p in d.preemptions] == [2]
    assert nodes_of(d, 1) == ["n"]


def test_every_policy_keeps_long_jobs_off_a_node_going_into_maintenance() -> None:
    nodes = [node("soon", 8, until=NOW + HOUR)]
    for name, decide_with in POLICIES.items():
        d = decide_with(snap(nodes, queued=[job(1, limit=2 * HOUR), job(2, limit=600.0,
                                                                          wait=-1)]))
        assert list(placed(d)) == [2], name


def test_a_job_that_checkpoints_runs_till_the_window_where_nothing_else_holds_it() -> None:
    """Two hours to the window, a 4-hour job: one that checkpoints starts and moves at the
    window; one that does not waits; with a free node without a window, both go there."""
    nodes = [node("soon", 8, until=NOW + 2 * HOUR)]
    d = decide(snap(nodes, queued=[job(1, limit=4 * HOUR, checkpointable=True),
                                   job(2, limit=4 * HOUR, wait=-1)]))
    assert nodes_of(d, 1) == ["soon"] and 2 not in placed(d)
    assert d.pending[2].code == "maintenance"
    d = decide(snap(nodes + [node("free", 1, island="")],
                    queued=[job(1, limit=4 * HOUR, checkpointable=True)]))
    assert nodes_of(d, 1) == ["free"]  # no move where none is needed
    # nor a job that is not to be stopped: by its own flag, or its tier's
    d = decide(snap(nodes, queued=[job(1, limit=4 * HOUR, checkpointable=True,
                                       preemptible=False),
                                   job(2, tier="enterprise", limit=4 * HOUR,
                                       checkpointable=True)]))
    assert not d.placements


def test_a_job_that_checkpoints_needs_window_run_s_before_the_window() -> None:
    nodes = [node("soon", 8, until=NOW + 300.0)]
    d = decide(snap(nodes, queued=[job(1, limit=4 * HOUR, checkpointable=True)]))
    assert not d.placements and d.pending[1].code == "maintenance"  # 5 min: not worth it
    strict = PolicyConfig(window_run_s=math.inf)
    d = decide(snap([node("soon", 8, until=NOW + 2 * HOUR)], config=strict,
                    queued=[job(1, limit=4 * HOUR, checkpointable=True)]))
    assert not d.placements
