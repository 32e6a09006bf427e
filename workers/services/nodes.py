"""Nodes join the fleet and prove they are alive."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from workers.models import Gpu, Node, NodeState


@dataclass(frozen=True)
class GpuInfo:
    index: int
    uuid: str
    memory_mb: int


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
                                     defaults={"uuid": g.uuid, "health": Gpu.Health.HEALTHY})
    # GPUs that disappeared stay on record (bindings refer to them) but take no work.
    Gpu.objects.filter(node=node).exclude(index__in=[g.index for g in gpus]).update(
        health=Gpu.Health.UNHEALTHY)
    return node


def node_heartbeat(*, name: str) -> bool:
    return Node.objects.filter(name=name).update(last_heartbeat=timezone.now()) == 1
