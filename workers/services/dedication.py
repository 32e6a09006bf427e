"""Nodes dedicated to one organization, as a customer's reserved capacity is sold: from the
next scheduling round only its jobs start there, and they fill those nodes before they take
shared GPUs from others (jobs/policy/placement.py); the nodes are its alone while they take
work, and idle while it has none. Jobs of other organizations already running there run on
to their end, or, evacuated, checkpoint and resume on shared nodes. Its caps and its fair
share count its GPUs there as they count any. Set by an operator (admin's node list, or
`manage.py node_dedicate`); each change is in the organizations' audit trails."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from jobs.models import Organization
from jobs.scheduler.trigger import request_tick
from jobs.services.audit import audit
from workers.models import Node
from workers.services import fleet


def nodes_dedicate(nodes: Iterable[Node], organization: Organization | None, *, by=None,
                   evacuate: bool = False) -> int:
    """Dedicate `nodes` to `organization`, or share them again (None), for `by` (an
    operator); with `evacuate`, ask the jobs of other organizations running there to
    checkpoint and stop (they queue again and resume elsewhere). Returns the jobs asked."""
    nodes = list(nodes)
    with transaction.atomic():
        before = _owners(nodes)
        Node.objects.filter(pk__in=[n.pk for n in nodes]).update(dedicated_to=organization)
        for org, names in before.items():
            if org != organization:
                audit(org, "nodes.shared", user=by, nodes=names)
        if organization is not None:
            audit(organization, "nodes.dedicated", user=by,
                  nodes=sorted(n.name for n in nodes))
    transaction.on_commit(request_tick)
    if not evacuate or organization is None:
        return 0
    reason = f"its node was dedicated to another organization ({organization.slug})"
    return fleet.evacuate_nodes([n.pk for n in nodes], reason, sparing=organization)


def _owners(nodes: list[Node]) -> dict[Organization, list[str]]:
    owners: dict[Organization, list[str]] = {}
    for node in Node.objects.filter(pk__in=[n.pk for n in nodes], dedicated_to__isnull=False
                                    ).select_related("dedicated_to").order_by("name"):
        owners.setdefault(node.dedicated_to, []).append(node.name)
    return owners

