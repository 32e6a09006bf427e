"""Celery tasks of the node workers; each node consumes only its own queue."""

from celery import shared_task

from workers.agent.runner import run_attempt as run_attempt_service
from workers.agent.runner import run_rank as run_rank_service
from workers.services.checkpoints import checkpoints_sweep


# Late ack + reject on worker loss: a killed worker's message is redelivered, and the
# fencing token makes the redelivery harmless (it is refused unless still startable).
@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_attempt(attempt_id: int, token: int) -> str:
    return run_attempt_service(attempt_id, token)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_rank(attempt_id: int, token: int, rank: int) -> str:
    """One further node's part of a gang that spans nodes (the same fencing applies)."""
    return run_rank_service(attempt_id, token, rank)


@shared_task(ignore_result=True)
def sweep_checkpoints() -> int:
    """Run by beat: delete the stored checkpoints no resume will read."""
    return checkpoints_sweep()
