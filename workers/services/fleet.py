"""Operators take nodes out of service and back: cordon, drain (optionally evacuating the
running jobs so that the node is free soon), and return to service."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.models import Attempt, AttemptStatus
from jobs.scheduler.trigger import request_tick
from jobs.states import JobState
from jobs.transitions import TransitionError, transition
from workers.models import Node, NodeState


def node_cordon(node: Node) -> None:
    """Take nothing new; what runs there runs on."""
    Node.objects.filter(pk=node.pk).exclude(state=NodeState.DOWN).update(
        state=NodeState.CORDONED)


def node_return_to_service(node: Node) -> None:
    """A cordoned or drained node takes work again."""
    Node.objects.filter(pk=node.pk, state__in=[NodeState.CORDONED, NodeState.DRAINING]).update(
        state=NodeState.ACTIVE)
    transaction.on_commit(request_tick)


def node_drain(node: Node, *, evacuate: bool = False, grace_s: float | None = None) -> int:
    """Take nothing new and, with `evacuate`, ask every job running there to checkpoint and
    stop within `grace_s` (the kill grace by default): it waits in the queue again and resumes
    elsewhere, as a preempted job does, and pays nothing for work it loses. Attempts that have
    not started yet run; drain again to move them too. Returns the jobs asked to stop."""
    grace = timedelta(seconds=settings.GPUSCHED_KILL_GRACE_S if grace_s is None else grace_s)
    Node.objects.filter(pk=node.pk).exclude(state=NodeState.DOWN).update(
        state=NodeState.DRAINING)
    if not evacuate:
        return 0
    asked = 0
    running = Attempt.objects.filter(node=node, status=AttemptStatus.RUNNING,
                                     ended_at__isnull=True, stop_requested="")
    for attempt in running.select_related("job", "node"):
        asked += _evacuate(attempt, grace)
    return asked


def _evacuate(attempt: Attempt, grace: timedelta) -> int:
    with transaction.atomic():
        stop = Attempt.objects.filter(pk=attempt.pk, stop_requested="", ended_at__isnull=True
                                      ).update(stop_requested="preempt",
                                               stop_deadline=timezone.now() + grace)
        if not stop:
            return 0
        try:
            transition(attempt.job, JobState.PREEMPTING, attempt=attempt,
                       reason=f"node {attempt.node.name} drained by an operator")
        except TransitionError:  # it ended or is being stopped for another reason
            transaction.set_rollback(True)
            return 0
    return 1
