"""What an organization has and where its credits went: for the API, the dashboard and the
grant command."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

from django.db.models import Q
from django.utils import timezone

from credits.models import Account, Transfer
from credits.services.usage import month_bounds
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
    """The organization's transfers, in or out of any of its wallets, newest first. By its
    wallets' ids, not through a join on them: the planner then reads a quiet organization's
    few transfers by their accounts' indexes rather than walking the whole ledger back."""
    wallets = list(Account.objects.filter(organization=organization).values_list("pk",
                                                                                 flat=True))
    mine = Transfer.objects.filter(Q(debit_id__in=wallets) | Q(credit_id__in=wallets))
    return mine.select_related("debit", "credit").order_by("-id")


RECENT_TRANSFERS = 50  # what the balance's answer and the dashboard show


def recent_transfers(organization: Organization):
    return transfers_of(organization)[:RECENT_TRANSFERS]


def job_transfers(job):
    """The job's movements of credits, oldest first: its statement."""
    return Transfer.objects.filter(job=job).order_by("pk")


STATEMENT_COLUMNS = ("id", "at", "kind", "direction", "bucket", "amount", "job", "attempt",
                     "memo")


def statement_rows(organization: Organization, month: date) -> Iterator[tuple]:
    """Every transfer in or out of the organization's wallets in `month` (UTC), oldest
    first, as STATEMENT_COLUMNS: the month's statement, read a chunk at a time."""
    start, end = month_bounds(month)
    month_of = transfers_of(organization).filter(created_at__gte=start, created_at__lt=end)
    for t in month_of.order_by("pk").iterator(chunk_size=2_000):
        incoming = t.credit.kind == Account.Kind.WALLET
        wallet = t.credit if incoming else t.debit
        yield (t.pk, t.created_at.isoformat(), t.kind, "in" if incoming else "out",
               wallet.bucket, t.amount, t.job_id or "", t.attempt_id or "", t.memo)
