"""What the policy sees of the simulated fleet: the same Snapshot the service's tick builds."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from jobs.policy.types import Allocation, NodeView, RunningView, Snapshot

if TYPE_CHECKING:
    from .engine import Simulator


def build_snapshot(sim: Simulator) -> Snapshot:
    t = sim.now
    nodes = [_node_view(sim, n, t) for n in sim.nodes.values()]
    running = _attempt_views(sim, t) + _nominee_views(sim, t)
    ledger = sim.ledger
    holds = {j: h for j, h in sim.holds.items() if j in sim.qviews}
    return Snapshot(t, nodes, running, list(sim.qviews.values()), sim.tiers,
                    ledger.org_usage.all_at(t), ledger.project_usage.all_at(t),
                    ledger.user_usage.all_at(t),
                    org_weights=sim.org_weights, holds=holds, config=sim.config)


def _node_view(sim: Simulator, n, t: float) -> NodeView:
    """A node as the tick shows it: down, drained for maintenance, or with its window."""
    m, schedulable, until = sim.maintenance, n.up, None
    if m is not None and m.covers(n.spec.name, t):
        if m.mode == "drain":
            schedulable = False
        elif m.mode == "window":
            until = m.at
    return NodeView(n.spec.name, n.spec.gpu_type, n.spec.gpu_memory_mb, n.spec.gpus,
                    tuple(sorted(n.free - n.nominated)) if n.up else (), "", n.spec.island,
                    schedulable, until)


def _attempt_views(sim: Simulator, t: float) -> list[RunningView]:
    """Running attempts, less any GPUs already promised to a preemptor."""
    nominated = {(a.node, g) for _, allocs in sim.nominated.values()
                 for a in allocs for g in a.gpus}
    views = []
    for att in sim.attempts.values():
        job = att.job
        allocs = att.allocs
        if nominated:
            allocs = tuple(Allocation(a.node, tuple(g for g in a.gpus
                                                    if (a.node, g) not in nominated))
                           for a in allocs)
            allocs = tuple(a for a in allocs if a.gpus)
            if not allocs:
                continue
        tle = att.start + att.restore + job.time_limit
        if att.stop_at is not None:
            exp = tle = att.stop_at
        elif job.expected_duration is not None:
            # as the service does: past its estimate, expected_end lies in the past
            exp = min(tle, att.start + att.restore + max(0.0, job.expected_duration - job.saved))
        else:
            exp = tle
        last = att.start + att.restore if job.saved > 0 else None
        if sim.ckpt > 0:
            k = math.floor(max(0.0, t - att.start - att.restore) / sim.ckpt)
            if k > 0:
                last = att.start + att.restore + k * sim.ckpt
        views.append(RunningView(att.id, job.job_id, job.org, job.tier, allocs,
                                 att.start, exp, tle, last, sim.ckpt > 0, True,
                                 job.preemptions, job.project, sim.ckpt or None, job.user))
    return views


def _nominee_views(sim: Simulator, t: float) -> list[RunningView]:
    """GPUs promised to a preemptor are shown as its attempt, starting when they free up.

    Not preemptible, as in the service, where the victims stopping for a preemptor are no
    longer victims and the preemptor has no attempt to stop until its GPUs are free.
    """
    views = []
    for job, allocs in sim.nominated.values():
        owners = [sim.attempts.get(sim.owner.get((a.node, g), -1))
                  for a in allocs for g in a.gpus]
        begin = max([t] + [o.stop_at for o in owners if o is not None and o.stop_at])
        restore = sim.restore_cost if job.saved > 0 else 0.0
        tle = begin + restore + job.time_limit
        exp = tle if job.expected_duration is None else min(
            tle, begin + restore + max(0.0, job.expected_duration - job.saved))
        views.append(RunningView(-job.job_id, job.job_id, job.org, job.tier, allocs,
                                 job.extra.get("nominated_at", t), exp, tle,
                                 begin if job.saved > 0 else None, sim.ckpt > 0, False,
                                 job.preemptions, job.project, user=job.user))
    return views
