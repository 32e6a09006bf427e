"""Operators take nodes out of service and back: cordon, drain (optionally evacuating the
running jobs so that the node is free soon), a maintenance window set ahead, and return to
service; and single GPUs. A node whose worker stops drains itself, evacuating, and returns
when its worker starts again."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Q

from jobs.models import Attempt, AttemptStatus
from jobs.scheduler.trigger import request_tick
from jobs.services.requeue import attempt_stop_and_requeue
from workers.models import Gpu, Node, NodeState
from workers.services.nodes import OPERATOR, WORKER_STOPPING


def node_cordon(node: Node) -> None:
    """Take nothing new; what runs there runs on."""
    Node.objects.filter(pk=node.pk).exclude(state=NodeState.DOWN).update(
        state=NodeState.CORDONED, state_reason="")


def node_return_to_service(node: Node) -> None:
    """A cordoned or drained node takes work again."""
    Node.objects.filter(pk=node.pk, state__in=[NodeState.CORDONED, NodeState.DRAINING]).update(
        state=NodeState.ACTIVE, state_reason="")
    transaction.on_commit(request_tick)


def node_schedule_maintenance(node: Node, at: datetime | None) -> None:
    """From now on the node starts only jobs whose time limit ends by `at` (the kill grace
    included), and from `at` none, while it stays in service: it empties itself for the work
    instead of idling for hours from a drain. Jobs already running there run on (a drain
    with evacuation moves them). None clears the window: the work is done."""
    Node.objects.filter(pk=node.pk).update(maintenance_at=at)
    transaction.on_commit(request_tick)


def node_drain(node: Node, *, evacuate: bool = False, grace_s: float | None = None) -> int:
    """Take nothing new and, with `evacuate`, ask every job running there to checkpoint and
    stop within `grace_s` (the kill grace by default): it waits in the queue again and resumes
    elsewhere, as a preempted job does, and pays nothing for work it loses. Attempts that have
    not started yet run; drain again to move them too. Returns the jobs asked to stop."""
    Node.objects.filter(pk=node.pk).exclude(state=NodeState.DOWN).update(
        state=NodeState.DRAINING, state_reason="")
    if not evacuate:
        return 0
    return _evacuate(node, f"node {node.name} drained by an operator", grace_s)


def node_worker_stopping(name: str) -> int:
    """The node's worker is stopping (a warm shutdown: an upgrade, a reboot): it drains
    itself and asks its running jobs to checkpoint and stop within the kill grace, so that
    they resume elsewhere instead of being lost with the node. An operator's cordon or drain
    stays as it is. Returns the jobs asked to stop."""
    node = Node.objects.filter(name=name).first()
    if node is None:
        return 0
    Node.objects.filter(pk=node.pk, state=NodeState.ACTIVE).update(
        state=NodeState.DRAINING, state_reason=WORKER_STOPPING)
    return _evacuate(node, f"node {name}'s worker is stopping", None)


def _evacuate(node: Node, reason: str, grace_s: float | None) -> int:
    # its own attempts, and the gangs spanning nodes that run a rank there
    here = Q(node=node) | Q(ranks__node=node, ranks__ended_at__isnull=True)
    running = Attempt.objects.filter(here, status=AttemptStatus.RUNNING,
                                     ended_at__isnull=True, stop_requested="").distinct()
    return sum(attempt_stop_and_requeue(a, reason=reason, grace_s=grace_s) for a in running)


def gpu_take_out(gpu: Gpu, *, by: str) -> None:
    """Take one GPU out of service (one that misbehaves in a way no reading shows): no new
    job lands on it; what runs there runs on. The node's readings and registrations leave the
    mark alone until an operator returns the GPU."""
    Gpu.objects.filter(pk=gpu.pk).update(health=Gpu.Health.UNHEALTHY,
                                         health_reason=f"{OPERATOR} {by}"[:200])


def gpu_return_to_service(gpu: Gpu) -> None:
    """Clear an operator's mark; the node's next reading judges the GPU again."""
    Gpu.objects.filter(pk=gpu.pk, health_reason__startswith=OPERATOR).update(
        health=Gpu.Health.HEALTHY, health_reason="")
    transaction.on_commit(request_tick)
