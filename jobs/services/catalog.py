"""What a client may ask for: each GPU type of the fleet, how many GPUs of it there are and
take work now, the most one node has (the largest gang on one node), its memory, its regions
and its price, so that a request's `gpu_types`, `min_gpu_memory_mb` and `region` are chosen
from what exists rather than found by a refusal or a `no_fit` reason."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from credits.models import GpuPrice
from jobs.scheduler.snapshot import schedulable
from workers.models import Node, NodeState


def gpu_catalog(now: datetime, organizations: Collection[int] = ()) -> list[dict]:
    """One entry a GPU type (of nodes not down, or with a price), by name, as `organizations`
    (ids) may use them: nodes dedicated to another organization are left out, and
    `dedicated_gpus` counts those dedicated to one of them (workers/services/dedication.py)."""
    prices = dict(GpuPrice.objects.values_list("gpu_type", "credits_per_gpu_hour"))
    # a priced type with no node yet is listed too, with 0 GPUs
    types: dict[str, dict] = {gpu_type: _empty() for gpu_type in prices}
    for node in Node.objects.exclude(state=NodeState.DOWN).only(
            "gpu_type", "gpu_count", "gpu_memory_mb", "region", "state", "last_heartbeat",
            "dedicated_to_id", "dedicated_from"):
        dedicated = node.dedicated_to_id is not None and (
            node.dedicated_from is None or node.dedicated_from <= now)  # not one ahead
        if dedicated and node.dedicated_to_id not in organizations:
            continue  # another organization's alone
        entry = types.setdefault(node.gpu_type, _empty())
        entry["gpus"] += node.gpu_count
        if dedicated:
            entry["dedicated_gpus"] += node.gpu_count
        if schedulable(node, now):
            entry["schedulable_gpus"] += node.gpu_count
        entry["most_on_one_node"] = max(entry["most_on_one_node"], node.gpu_count)
        entry["gpu_memory_mb"] = max(entry["gpu_memory_mb"], node.gpu_memory_mb)
        if node.region:
            entry["regions"].add(node.region)
    return [{"gpu_type": name, **entry, "regions": sorted(entry["regions"]),
             "credits_per_gpu_hour": prices.get(name)}
            for name, entry in sorted(types.items())]


def _empty() -> dict:
    return {"gpus": 0, "schedulable_gpus": 0, "dedicated_gpus": 0, "most_on_one_node": 0,
            "gpu_memory_mb": 0, "regions": set()}
