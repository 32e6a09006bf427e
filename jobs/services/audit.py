"""The organization's audit trail: one event per change its people make (jobs/models/audit.py),
written in the change's own transaction, so that a change is never without its event. Kept
GPUSCHED_AUDIT_RETENTION_DAYS (0, the default: for ever), as the operator's own rules say."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from jobs.models import ApiKey, Organization, OrganizationEvent

log = logging.getLogger(__name__)


def audit(organization: Organization, action: str, *, user=None, api_key: ApiKey | None = None,
          **detail) -> OrganizationEvent:
    """Record that `user` (a member) or `api_key` (a client) did `action`, with `detail`;
    logged too once the change commits, for log-based tools (LOG_FORMAT=json)."""
    event = OrganizationEvent.objects.create(organization=organization, action=action,
                                             user=user, api_key=api_key, detail=detail)
    line = ("%s: %s by %s", organization.slug, action, event.actor)
    transaction.on_commit(lambda: log.info(*line, extra={
        "audit": action, "organization_id": organization.pk, "detail": detail}))
    return event


def recent_events(organization: Organization, limit: int = 20) -> list[OrganizationEvent]:
    return list(organization.audit_events.select_related("user", "api_key")
                .order_by("-pk")[:limit])


EXPIRE_BATCH = 5_000  # events one sweep deletes at most: it stays short, the next goes on


def expire_events(*, now: datetime) -> int:
    """Delete the events made more than GPUSCHED_AUDIT_RETENTION_DAYS ago, oldest first;
    returns how many."""
    days = settings.GPUSCHED_AUDIT_RETENTION_DAYS
    if days <= 0:
        return 0
    # ids grow with time: the oldest are first on the primary key, no index on `at` needed
    old = OrganizationEvent.objects.filter(at__lt=now - timedelta(days=days)).order_by("pk")
    deleted, _ = OrganizationEvent.objects.filter(
        pk__in=list(old.values_list("pk", flat=True)[:EXPIRE_BATCH])).delete()
    return deleted
