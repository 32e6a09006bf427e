"""Nodes join the fleet and prove they are alive."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from jobs.models import GpuBinding
from workers.agent.gpu_watch import GpuReport
from workers.agent.gpus import GpuInfo
from workers.models import Gpu, Node, NodeState

log = logging.getLogger(__name__)

__all__ = ["MAINTENANCE", "OPERATOR", "STRAY", "WORKER_STOPPING", "GpuInfo", "node_gpu_health",
           "node_gpu_strays", "node_heartbeat", "node_register"]


@transaction.atomic
def node_register(*, name: str, gpu_type: str, gpus: list[GpuInfo], region: str = "",
                  island: str = "", address: str = "", labels: dict | None = None,
                  reading: GpuReport | None = None) -> Node:
    """Create or refresh a node and its GPUs; a returning node becomes ACTIVE again, and so
    does one that drained itself as its worker stopped (fleet.node_worker_stopping).

    `reading`: what its agent read of the GPUs as it started, recorded in the same
    transaction, so no GPU is free and healthy before it has been read. Nothing on them is
    the starting agent's own yet: any process there is a leftover of its earlier run.
    """
    memory = min((g.memory_mb for g in gpus), default=0)
    node, created = Node.objects.select_for_update(no_key=True).get_or_create(
        name=name, defaults={"gpu_type": gpu_type, "gpu_count": len(gpus)})
    node.gpu_type, node.gpu_count, node.gpu_memory_mb = gpu_type, len(gpus), memory
    node.region, node.island, node.address, node.labels = region, island, address, labels or {}
    if node.state == NodeState.DOWN or created or node.state_reason == WORKER_STOPPING:
        node.state, node.state_reason = NodeState.ACTIVE, ""
    node.last_heartbeat = timezone.now()
    node.save()
    for g in gpus:
        Gpu.objects.update_or_create(node=node, index=g.index, defaults={"uuid": g.uuid})
    present = Gpu.objects.filter(node=node, index__in=[g.index for g in gpus])
    # an operator's mark outlives restarts; every other judgement starts afresh
    present.exclude(health_reason__startswith=OPERATOR).update(health=Gpu.Health.HEALTHY,
                                                               health_reason="")
    # GPUs that disappeared stay on record (bindings refer to them) but take no work.
    Gpu.objects.filter(node=node).exclude(pk__in=present).update(
        health=Gpu.Health.UNHEALTHY, health_reason="gone from the node")
    if reading is not None:
        node_gpu_strays(name=name, strays=reading.busy)
        node_gpu_health(name=name, problems=reading.problems, busy=reading.busy)
    return node


def node_heartbeat(*, name: str) -> bool:
    return Node.objects.filter(name=name).update(last_heartbeat=timezone.now()) == 1


STRAY = "in use by process"
OPERATOR = "taken out of service by"  # workers/services/fleet.py: only an operator clears it
# why a node drained itself (fleet.node_worker_stopping): its worker's next start ends it, an
# operator's cordon or drain replaces it
WORKER_STOPPING = "its worker is stopping: its jobs checkpoint and queue to resume elsewhere"
# why a node drained itself (fleet.maintenance_due): ending or moving its window ends it
MAINTENANCE = "in its maintenance window: End maintenance returns it"


def node_gpu_health(*, name: str, problems: Mapping[str, str],
                    busy: Mapping[str, tuple[int, ...]] | None = None) -> int:
    """Record what the node read of its GPUs: uuid -> problem ("" when fit), and which GPUs
    processes were using (`busy`: uuid -> pids).

    An unfit GPU takes no new work (the snapshot holds healthy GPUs only); what runs on it
    is left to end on its own, as a binary on a failing card does. A GPU marked for a process
    an attempt left behind (`node_gpu_strays`) stays unfit while it is busy. Only changes are
    written, so a steady fleet's heartbeats cost no GPU writes. Returns the GPUs changed.
    """
    busy = busy or {}
    changed = 0
    gpus = Gpu.objects.filter(node__name=name, uuid__in=list(problems))
    for gpu in gpus.exclude(health_reason__startswith=OPERATOR).only(
            "id", "uuid", "health", "health_reason"):
        problem = problems[gpu.uuid]
        if not problem and gpu.health_reason.startswith(STRAY) and busy.get(gpu.uuid):
            problem = _stray_problem(busy[gpu.uuid])
        changed += _set_health(gpu, name, problem)
    return changed


@transaction.atomic
def node_gpu_strays(*, name: str, strays: Mapping[str, tuple[int, ...]],
                    attempt_id: int | None = None) -> int:
    """Take out of service the GPUs that processes still use after their attempt ended
    (`attempt_id`), or that processes use as the node's agent starts (None: nothing on its
    GPUs is its own yet).

    A binary's child that left its process group (a daemon, its own session) survives the
    kill and holds GPU memory: the next job there would run out of it. Called before the
    attempt reports its end, so the GPUs are never free and healthy in between; the node's
    readings return them once the processes are gone.
    """
    gpus = (Gpu.objects.select_for_update(no_key=True)
            .filter(node__name=name, uuid__in=list(strays))
            .exclude(health_reason__startswith=OPERATOR))
    if attempt_id is not None:
        # a fenced-off attempt's GPUs may already run the attempt that replaced it
        gpus = gpus.exclude(Exists(GpuBinding.objects.filter(
            gpu=OuterRef("pk"), released_at__isnull=True).exclude(attempt_id=attempt_id)))
    changed = sum(_set_health(gpu, name, _stray_problem(strays[gpu.uuid]))
                  for gpu in gpus.only("id", "uuid", "health", "health_reason"))
    if changed:
        log.warning("%d GPU(s) of %s in use by processes %s", changed, name,
                    f"attempt {attempt_id} left" if attempt_id else "found at start",
                    extra={"node": name, "attempt_id": attempt_id})
    return changed


def _set_health(gpu: Gpu, node: str, problem: str) -> int:
    problem = problem[:200]
    health = Gpu.Health.UNHEALTHY if problem else Gpu.Health.HEALTHY
    if (gpu.health, gpu.health_reason) == (health, problem):
        return 0
    Gpu.objects.filter(pk=gpu.pk).update(health=health, health_reason=problem)
    log.warning("GPU %s on %s is now %s%s", gpu.uuid, node, health,
                f": {problem}" if problem else "",
                extra={"node": node, "gpu": gpu.uuid, "health": health})
    return 1


def _stray_problem(pids: tuple[int, ...]) -> str:
    shown = ", ".join(map(str, pids[:5])) + (" …" if len(pids) > 5 else "")
    return f"{STRAY} {shown} that no attempt owns: end it to return the GPU"
