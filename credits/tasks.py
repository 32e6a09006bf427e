"""Celery tasks of the ledger: thin wrappers over services."""

from celery import shared_task
from django.utils import timezone

from credits.services.grants import expire_buckets


@shared_task(ignore_result=True)
def expire_credit_buckets() -> int:
    """Run by beat: what expired promotional buckets have left goes to system:expired."""
    return expire_buckets(now=timezone.now())
