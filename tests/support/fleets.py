"""A small real fleet for the end-to-end outage tests: one node of two GPUs, beat and the
scheduler's worker, H100 priced at a credit a second, and the organization funded."""

from __future__ import annotations

import uuid

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from jobs.models import Organization
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node


def small_fleet(org: Organization, tag: str, **env: str) -> ProcessGroup:
    """Started and ready; `env` for every process (a lease, a Redis of the test's own)."""
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5", GPUSCHED_METER_INTERVAL_S="1",
                         **env)
    node = f"{tag}-{uuid.uuid4().hex[:6]}"
    group.node(node, 2)
    wait_for(lambda: Node.objects.filter(name=node).exists(), 60, "the node")
    group.scheduler()
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=org, amount=100_000)
    return group
