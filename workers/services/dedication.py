"""Nodes dedicated to one organization, as a customer's reserved capacity is sold: only its
jobs start there, and they fill those nodes before they take shared GPUs from others
(jobs/policy/placement.py); the nodes are its alone while they take work, and idle while it
has none. Its caps and its fair share count its GPUs there as they count any.

A dedication may begin at a time ahead (a training run booked for Tuesday): till then the
nodes are shared, but every other organization's jobs must end by then, as before a
maintenance window, while its own may run on past it; when it begins, others' jobs still
there (started before it was set) checkpoint and resume elsewhere. It may end by itself at
a set time, as Slurm's reservations do. Set by an operator (admin's node list, or
`manage.py node_dedicate`); each change is in the organizations' audit trails."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from jobs.models import Organization
from jobs.scheduler.trigger import request_tick
from jobs.services.audit import audit
from jobs.services.errors import ValidationFailed
from workers.models import Node
from workers.services import fleet


def nodes_dedicate(nodes: Iterable[Node], organization: Organization | None, *, by=None,
                   at: datetime | None = None, until: datetime | None = None,
                   evacuate: bool = False) -> int:
    """Dedicate `nodes` to `organization` from `at` (None or past: now) until `until` (None:
    until an operator ends it), or share them again (None), for `by` (an operator). With
    `evacuate`, a dedication that begins now asks the jobs of other organizations running
    there to checkpoint and stop (they queue again and resume elsewhere); one that begins
    later moves them when it begins. Returns the jobs asked now."""
    nodes, now = list(nodes), timezone.now()
    begins = at if organization is not None and at is not None and at > now else None
    if organization is not None and until is not None and until <= (begins or now):
        raise ValidationFailed("a dedication must end after it begins",
                               code="dedication_ends_before_it_begins", field="until")
    with transaction.atomic():
        before = _owners(Node.objects.filter(pk__in=[n.pk for n in nodes]))
        Node.objects.filter(pk__in=[n.pk for n in nodes]).update(
            dedicated_to=organization, dedicated_from=begins,
            dedicated_until=until if organization is not None else None)
        for org, names in before.items():
            if org != organization:
                audit(org, "nodes.shared", user=by, nodes=names)
        if organization is not None:
            audit(organization, "nodes.dedicated", user=by, nodes=sorted(n.name for n in nodes),
                  at=(begins or now).isoformat(), until=until.isoformat() if until else None)
    transaction.on_commit(request_tick)
    if not evacuate or organization is None or begins is not None:
        return 0
    return _evacuate_others([n.pk for n in nodes], organization)


def dedications_due(now: datetime) -> int:
    """Dedications whose end has come end: their nodes are shared again. Those whose start
    has come, less the kill grace, begin: the jobs of others still there checkpoint and
    stop within the grace, to resume elsewhere. Every tick calls it (one read of the few
    dedicated nodes). Returns the jobs asked to stop."""
    for org, names in _owners(Node.objects.filter(dedicated_until__lte=now)).items():
        with transaction.atomic():
            if Node.objects.filter(name__in=names, dedicated_to=org,
                                   dedicated_until__lte=now).update(
                    dedicated_to=None, dedicated_from=None, dedicated_until=None):
                audit(org, "nodes.shared", nodes=names, reason="its dedication ended")
    asked = 0
    begun = now + fleet.kill_grace()
    for node in Node.objects.filter(dedicated_from__lte=begun).select_related("dedicated_to"):
        if Node.objects.filter(pk=node.pk, dedicated_from=node.dedicated_from).update(
                dedicated_from=None):  # once: an operator may move it meanwhile
            asked += _evacuate_others([node.pk], node.dedicated_to)
    return asked


def begins_at(node: Node) -> float | None:
    """When a dedication ahead begins for the scheduler, as a window (less the kill grace a
    job past its limit is given to stop); None for one begun, or none."""
    if node.dedicated_from is None or node.dedicated_to_id is None:
        return None
    return node.dedicated_from.timestamp() - settings.GPUSCHED_KILL_GRACE_S


def _owners(nodes: QuerySet[Node]) -> dict[Organization, list[str]]:
    """The organizations `nodes` are dedicated to, each with the names of its own."""
    owners: dict[Organization, list[str]] = {}
    for node in nodes.filter(dedicated_to__isnull=False).select_related(
            "dedicated_to").order_by("name"):
        owners.setdefault(node.dedicated_to, []).append(node.name)
    return owners


def _evacuate_others(nodes: list[int], organization: Organization) -> int:
    reason = f"its node was dedicated to another organization ({organization.slug})"
    return fleet.evacuate_nodes(nodes, reason, sparing=organization)
