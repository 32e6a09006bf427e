"""Celery tasks of the jobs app: thin wrappers over services."""

from celery import shared_task
from django.utils import timezone

from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.audit import expire_events
from jobs.services.outputs import expire_outputs as outputs_expire
from jobs.services.retention import jobs_erase_due
from jobs.services.webhooks import expire_deliveries, webhook_deliver, webhooks_sweep
from workers.services.logs import expire_logs as logs_expire


@shared_task(ignore_result=True)
def scheduler_tick() -> bool:
    """Run by beat every GPUSCHED_TICK_SECONDS and on demand (submit, attempt end)."""
    return scheduler_tick_run().ran


@shared_task(ignore_result=True)
def deliver_webhook(delivery_id: int) -> None:
    """Post one notice of a job's end (jobs/services/webhooks.py); retries come by the sweep."""
    webhook_deliver(delivery_id)


@shared_task(ignore_result=True)
def sweep_webhooks() -> int:
    """Run by beat: send the notices that are due again, or whose first send was lost."""
    return webhooks_sweep()


@shared_task(ignore_result=True)
def expire_outputs() -> int:
    """Run by beat: delete the outputs (jobs/services/outputs.py), the binaries' logs
    (workers/services/logs.py), the webhook deliveries that ended
    (jobs/services/webhooks.py) and the audit events (jobs/services/audit.py), each kept past
    its retention."""
    now = timezone.now()
    return (outputs_expire(now=now) + logs_expire(now=now) + expire_deliveries(now=now)
            + expire_events(now=now))


@shared_task(ignore_result=True)
def erase_due_content() -> int:
    """Run by beat every 5 minutes: erase the ended jobs past their organization's own
    retention (jobs/services/retention.py)."""
    return jobs_erase_due(now=timezone.now())
