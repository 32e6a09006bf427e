"""What an organization has and where its credits went: for the API, the dashboard and the
grant command."""

from __future__ import annotations

from django.utils import timezone

from credits.models import Account, Transfer
from jobs.models import Organization


def organization_balance(organization: Organization) -> dict:
    """What the organization has: spendable, held by its jobs, and bucket by bucket."""
    now = timezone.now()
    wallets = Account.objects.filter(kind=Account.Kind.WALLET, organization=organization
                                     ).order_by("spend_priority", "expires_at", "pk")
    buckets = [{"bucket": w.bucket, "available": max(0, w.available), "held": w.debits_pending,
                "expires_at": w.expires_at} for w in wallets]
    return {"available": sum(b["available"] for b in buckets
                             if b["expires_at"] is None or b["expires_at"] > now),
            "held": sum(b["held"] for b in buckets), "buckets": buckets}


def transfers_of(organization: Organization):
    """The organization's transfers, in or out of any of its wallets, newest first."""
    mine = (Transfer.objects.filter(debit__organization=organization)
            | Transfer.objects.filter(credit__organization=organization))
    return mine.select_related("debit", "credit").order_by("-id")


RECENT_TRANSFERS = 50  # what the balance's answer and the dashboard show


def recent_transfers(organization: Organization):
    return transfers_of(organization)[:RECENT_TRANSFERS]


def job_transfers(job):
    """The job's movements of credits, oldest first: its statement."""
    return Transfer.objects.filter(job=job).order_by("pk")
