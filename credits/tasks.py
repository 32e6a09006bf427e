"""Celery tasks of the ledger: thin wrappers over services."""

from celery import shared_task
from django.utils import timezone

from credits.services.allowances import grant_monthly_allowances
from credits.services.grants import expire_buckets


@shared_task(ignore_result=True)
def expire_credit_buckets() -> int:
    """Run by beat: what expired promotional buckets have left goes to system:expired."""
    return expire_buckets(now=timezone.now())


@shared_task(ignore_result=True)
def grant_allowances() -> int:
    """Run by beat: this month's allowance to each organization of a tier that gives one."""
    return grant_monthly_allowances(now=timezone.now())
