"""First-fit FIFO: what a plain Celery queue does. A baseline, and the simplest policy."""

from __future__ import annotations

from .types import Allocation, Decisions, NodeView, PendingReason, Placement, QueuedJob, Snapshot


def _fits(job: QueuedJob, node: NodeView, free: int) -> bool:
    if not node.schedulable or free < job.gpus:
        return False
    if job.gpu_types and node.gpu_type not in job.gpu_types:
        return False
    if job.region and node.region != job.region:
        return False
    return node.gpu_memory_mb >= job.min_gpu_memory_mb


def decide(snapshot: Snapshot) -> Decisions:
    """Place queued jobs in arrival order on the first node that fits; stop at none."""
    out = Decisions()
    free = {n.name: list(n.free_gpus) for n in snapshot.nodes}
    queue = sorted(snapshot.queued, key=lambda j: (j.enqueued_at, j.job_id))
    for pos, job in enumerate(queue):
        node = next((n for n in snapshot.nodes if _fits(job, n, len(free[n.name]))), None)
        if node is None:
            for rest in queue[pos:]:
                out.pending[rest.job_id] = PendingReason("fifo_blocked", "waiting in arrival order")
            break
        taken, free[node.name] = free[node.name][: job.gpus], free[node.name][job.gpus :]
        out.placements.append(Placement(job.job_id, (Allocation(node.name, tuple(taken)),)))
    return out
