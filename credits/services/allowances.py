"""Monthly allowances: a tier may give each of its organizations promotional credits at the
start of every calendar month (UTC), expiring when the month ends, so that a free tier stays
usable once GPUs have prices. Beat grants them; each is one grant with an idempotency key per
organization and month, so a repeated or concurrent run grants nothing twice."""

from __future__ import annotations

from datetime import datetime

from credits.models import Transfer
from credits.services.budgets import month_start
from credits.services.grants import credits_grant
from jobs.models import Organization


def next_month_start(now: datetime) -> datetime:
    start = month_start(now)
    return start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(
        month=start.month + 1)


def allowance_key(organization_id: int, now: datetime) -> str:
    return f"allowance:{organization_id}:{month_start(now):%Y-%m}"


def grant_monthly_allowances(*, now: datetime) -> int:
    """Grant this month's allowance to every organization whose tier has one and that has
    not had it; returns how many it granted to (a concurrent run may have been first for
    some of them: the grant's key makes that one grant)."""
    due = list(Organization.objects.filter(tier__monthly_credits__gt=0).select_related("tier"))
    keys = {org.pk: allowance_key(org.pk, now) for org in due}
    # the keys already granted, in one indexed read rather than one per organization
    done = set(Transfer.objects.filter(idempotency_key__in=keys.values())
               .values_list("idempotency_key", flat=True))
    granted = 0
    for org in due:
        key = keys[org.pk]
        if key in done:
            continue
        credits_grant(organization=org, amount=org.tier.monthly_credits, promo=True,
                      expires_at=next_month_start(now), idempotency_key=key,
                      memo=f"tier {org.tier.name} allowance for {month_start(now):%Y-%m}")
        granted += 1
    return granted
