"""Operators take nodes out of service and back: cordon, drain (optionally evacuating the
running jobs so that the node is free soon), a maintenance window set ahead, and return to
service; and single GPUs. A node whose worker stops drains itself, evacuating, and returns
when its worker starts again; one whose maintenance window comes drains itself, evacuating,
until the window's end, or an operator, ends it."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs.models import Attempt, AttemptStatus, Organization
from jobs.scheduler.trigger import request_tick
from jobs.services.errors import ValidationFailed
from jobs.services.requeue import attempt_stop_and_requeue
from workers.models import Gpu, Node, NodeState
from workers.services.nodes import MAINTENANCE, OPERATOR, WORKER_STOPPING


def node_cordon(node: Node) -> None:
    """Take nothing new; what runs there runs on."""
    Node.objects.filter(pk=node.pk).exclude(state=NodeState.DOWN).update(
        state=NodeState.CORDONED, state_reason="")


def node_return_to_service(node: Node) -> None:
    """A cordoned or drained node takes work again; a maintenance window that has come ends
    with it (the work is done), one ahead stays."""
    with transaction.atomic():
        Node.objects.filter(pk=node.pk, state__in=[NodeState.CORDONED, NodeState.DRAINING]
                            ).update(state=NodeState.ACTIVE, state_reason="")
        _begun_windows(timezone.now()).filter(pk=node.pk).update(maintenance_at=None,
                                                                  maintenance_until=None)
    transaction.on_commit(request_tick)


def node_schedule_maintenance(node: Node, at: datetime | None,
                              until: datetime | None = None) -> None:
    """From now on the node starts only jobs whose time limit ends by `at` (the kill grace
    included): it empties itself for the work instead of idling for hours from a drain. When
    the window comes (`maintenance_due`) it drains and evacuates what still runs there; at
    `until`, if given, it takes work again by itself. None ends the window (the work is
    done), and so does moving it later than that: a node drained for it takes work again."""
    if at is not None and until is not None and until <= at:
        raise ValidationFailed("the maintenance must end after it begins",
                               code="maintenance_ends_before_it_begins", field="until")
    with transaction.atomic():
        Node.objects.filter(pk=node.pk).update(maintenance_at=at,
                                               maintenance_until=until if at else None)
        if at is None or at - kill_grace() > timezone.now():
            _end_maintenance_drain(Node.objects.filter(pk=node.pk))
    transaction.on_commit(request_tick)


def maintenance_due(now: datetime) -> int:
    """Windows whose end has come end: their nodes take work again. Nodes whose window has
    come, less the kill grace, leave service: an active one drains (an operator's cordon or
    drain stays as it is) and the jobs still running there, started before the window was
    set, are asked to checkpoint and stop within the grace, to resume elsewhere, so that the
    node is empty when the work begins. Every tick calls it; a job is asked once. Returns the
    jobs asked to stop."""
    ended, due, active = _windows_now(now)
    if ended:  # (an operator may move a window meanwhile: each update checks it again)
        with transaction.atomic():
            over = Node.objects.filter(pk__in=ended, maintenance_until__lte=now)
            _end_maintenance_drain(over)
            over.update(maintenance_at=None, maintenance_until=None)
    if active:
        _begun_windows(now).filter(pk__in=active, state=NodeState.ACTIVE).update(
            state=NodeState.DRAINING, state_reason=MAINTENANCE)
    if not due:
        return 0
    return evacuate_nodes(due, "a node it runs on leaves service for maintenance", None)


def _windows_now(now: datetime) -> tuple[list[int], list[int], list[int]]:
    """(nodes whose window has ended, nodes not down in their window, the active ones of
    those): one read of the few nodes with a window."""
    ended, due, active, begun = [], [], [], now + kill_grace()
    for pk, state, at, until in Node.objects.filter(maintenance_at__isnull=False).values_list(
            "pk", "state", "maintenance_at", "maintenance_until"):
        if until is not None and until <= now:
            ended.append(pk)
        elif at <= begun and state != NodeState.DOWN:
            due.append(pk)
            if state == NodeState.ACTIVE:
                active.append(pk)
    return ended, due, active


def _end_maintenance_drain(nodes) -> None:
    nodes.filter(state=NodeState.DRAINING, state_reason=MAINTENANCE).update(
        state=NodeState.ACTIVE, state_reason="")


def kill_grace() -> timedelta:
    return timedelta(seconds=settings.GPUSCHED_KILL_GRACE_S)


def _begun_windows(now: datetime):
    # the policy starts nothing there from the window less the kill grace (snapshot.window_end)
    return Node.objects.filter(maintenance_at__lte=now + kill_grace())


def node_drain(node: Node, *, evacuate: bool = False, grace_s: float | None = None) -> int:
    """Take nothing new and, with `evacuate`, ask every job running there to checkpoint and
    stop within `grace_s` (the kill grace by default): it waits in the queue again and resumes
    elsewhere, as a preempted job does, and pays nothing for work it loses. Attempts that have
    not started yet run; drain again to move them too. Returns the jobs asked to stop."""
    Node.objects.filter(pk=node.pk).exclude(state=NodeState.DOWN).update(
        state=NodeState.DRAINING, state_reason="")
    if not evacuate:
        return 0
    return evacuate_nodes([node.pk], f"node {node.name} drained by an operator", grace_s)


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
    return evacuate_nodes([node.pk], f"node {name}'s worker is stopping", None)


def evacuate_nodes(nodes: Collection[int], reason: str, grace_s: float | None = None, *,
             sparing: Organization | None = None) -> int:
    """Ask the jobs running on `nodes` (but `sparing`'s) to checkpoint and stop within
    `grace_s` (the kill grace by default), to resume elsewhere; returns how many were asked."""
    # their own attempts, and the gangs spanning nodes that run a rank there
    here = Q(node__in=nodes) | Q(ranks__node__in=nodes, ranks__ended_at__isnull=True)
    running = Attempt.objects.filter(here, status=AttemptStatus.RUNNING,
                                     ended_at__isnull=True, stop_requested="").distinct()
    if sparing is not None:
        running = running.exclude(job__organization=sparing)
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
