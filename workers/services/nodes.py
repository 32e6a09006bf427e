"""Nodes join the fleet and prove they are alive."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from django.db import transaction
from django.utils import timezone

from workers.agent.gpus import GpuInfo
from workers.models import Gpu, Node, NodeState

log = logging.getLogger(__name__)

__all__ = ["GpuInfo", "node_gpu_health", "node_heartbeat", "node_register"]


@transaction.atomic
def node_register(*, name: str, gpu_type: str, gpus: list[GpuInfo], region: str = "",
                  island: str = "", labels: dict | None = None) -> Node:
    """Create or refresh a node and its GPUs; a returning node becomes ACTIVE again."""
    memory = min((g.memory_mb for g in gpus), default=0)
    node, created = Node.objects.select_for_update(no_key=True).get_or_create(
        name=name, defaults={"gpu_type": gpu_type, "gpu_count": len(gpus)})
    node.gpu_type, node.gpu_count, node.gpu_memory_mb = gpu_type, len(gpus), memory
    node.region, node.island, node.labels = region, island, labels or {}
    if node.state == NodeState.DOWN or created:
        node.state = NodeState.ACTIVE
    node.last_heartbeat = timezone.now()
    node.save()
    for g in gpus:
        Gpu.objects.update_or_create(node=node, index=g.index,
                                     defaults={"uuid": g.uuid, "health": Gpu.Health.HEALTHY,
                                               "health_reason": ""})
    # GPUs that disappeared stay on record (bindings refer to them) but take no work.
    Gpu.objects.filter(node=node).exclude(index__in=[g.index for g in gpus]).update(
        health=Gpu.Health.UNHEALTHY, health_reason="gone from the node")
    return node


def node_heartbeat(*, name: str) -> bool:
    return Node.objects.filter(name=name).update(last_heartbeat=timezone.now()) == 1


def node_gpu_health(*, name: str, problems: Mapping[str, str]) -> int:
    """Record what the node read of its GPUs: uuid -> problem ("" when fit).

    An unfit GPU takes no new work (the snapshot holds healthy GPUs only); what runs on it
    is left to end on its own, as a binary on a failing card does. Only changes are
    written, so a steady fleet's heartbeats cost no GPU writes. Returns the GPUs changed.
    """
    changed = 0
    gpus = Gpu.objects.filter(node__name=name, uuid__in=list(problems))
    for gpu in gpus.only("id", "uuid", "health", "health_reason"):
        problem = problems[gpu.uuid][:200]
        health = Gpu.Health.UNHEALTHY if problem else Gpu.Health.HEALTHY
        if (gpu.health, gpu.health_reason) == (health, problem):
            continue
        Gpu.objects.filter(pk=gpu.pk).update(health=health, health_reason=problem)
        changed += 1
        log.warning("GPU %s on %s is now %s%s", gpu.uuid, name, health,
                    f": {problem}" if problem else "",
                    extra={"node": name, "gpu": gpu.uuid, "health": health})
    return changed
