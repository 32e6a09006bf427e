"""Tell an organization when its available credits fall below its threshold: one notice
(webhook event credits.low) per fall, again only after they have risen back above it."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q

from credits.services.statements import organization_balance
from jobs.models import Organization
from jobs.services.webhooks import notify_organization

log = logging.getLogger(__name__)


def watch_low_credits(organization_id: int) -> None:
    """Check once the current transaction commits. Not inside it: the check locks the
    organization's row, which the ledger's lock order puts before any wallet the caller may
    hold (docs/credits.md, "Invariant 5"). Robust: a failed check is logged, and never
    turns the committed work's answer (an accepted job's 202, say) into an error."""
    transaction.on_commit(lambda: low_credits_check(organization_id), robust=True)


def low_credits_check(organization_id: int) -> bool | None:
    """Compare the available credits with the threshold and tell the organization when they
    have just fallen below it; True / False when its state changed, None when not."""
    with transaction.atomic():
        # one primary-key read, and no lock, for an organization that asked for no notice
        org = (Organization.objects.select_for_update(no_key=True)
               .filter(Q(low_credits_threshold__gt=0) | Q(low_credits_notified=True),
                       pk=organization_id).first())
        if org is None:
            return None
        available = organization_balance(org)["available"]
        low = bool(org.low_credits_threshold) and available < org.low_credits_threshold
        if low == org.low_credits_notified:
            return None
        Organization.objects.filter(pk=org.pk).update(low_credits_notified=low)
        if low:
            log.info("organization %s is low on credits: %d available, threshold %d",
                     org.slug, available, org.low_credits_threshold,
                     extra={"organization": org.slug, "available": available})
            notify_organization(org.pk, "credits.low", {"organization": org.slug, "credits": {
                "available": available, "threshold": org.low_credits_threshold}})
        return low
