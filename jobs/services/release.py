"""What every end of an attempt does besides its own row: free its GPUs, end its ranks."""

from __future__ import annotations

from datetime import datetime

from jobs.models import AttemptRank, AttemptStatus, GpuBinding


def release_gpus(attempt_id: int, now: datetime, node_id: int | None = None) -> None:
    """Free the GPUs the attempt still holds, on every node or on one."""
    bound = GpuBinding.objects.filter(attempt_id=attempt_id, released_at__isnull=True)
    if node_id is not None:
        bound = bound.filter(gpu__node_id=node_id)
    bound.update(released_at=now)


def release_attempt(attempt_id: int, now: datetime) -> None:
    """Free the attempt's GPUs on every node it holds, and end its ranks still live: their
    next call is then refused as stale and their processes are killed (workers/agent)."""
    release_gpus(attempt_id, now)
    AttemptRank.objects.filter(attempt_id=attempt_id, ended_at__isnull=True).update(
        status=AttemptStatus.ENDED, ended_at=now)
