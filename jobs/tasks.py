"""Celery tasks of the jobs app: thin wrappers over services."""

from celery import shared_task

from jobs.scheduler.tick import scheduler_tick_run


@shared_task(ignore_result=True)
def scheduler_tick() -> bool:
    """Run by beat every GPUSCHED_TICK_SECONDS and on demand (submit, attempt end)."""
    return scheduler_tick_run().ran
