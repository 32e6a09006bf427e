"""Checks that hold for the ledger after anything at all (invariant 5)."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Sum

from credits.models import Account, Hold, Transfer
from credits.services.audit import audit_ledger

_PENDING_SIGN = {"HOLD": 1, "POST": -1, "VOID": -1}


def assert_ledger_consistent() -> None:
    """Every account's sums are what its transfers add up to, all balances sum to zero, no
    wallet is below zero, and every hold has moved at most what it reserved. Recomputed here
    transfer by transfer, and by the operators' audit (credits/services/audit.py)."""
    assert audit_ledger() == []
    sums: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for t in Transfer.objects.all():
        if t.kind in _PENDING_SIGN:
            sums[t.debit_id]["debits_pending"] += _PENDING_SIGN[t.kind] * t.amount
            sums[t.credit_id]["credits_pending"] += _PENDING_SIGN[t.kind] * t.amount
        if t.kind not in ("HOLD", "VOID"):
            sums[t.debit_id]["debits_posted"] += t.amount
            sums[t.credit_id]["credits_posted"] += t.amount
    for account in Account.objects.all():
        for name in ("credits_posted", "debits_posted", "credits_pending", "debits_pending"):
            assert getattr(account, name) == sums[account.pk][name], (account, name)
        if account.kind == Account.Kind.WALLET:
            assert account.available >= 0, account
    totals = Account.objects.aggregate(c=Sum("credits_posted"), d=Sum("debits_posted"),
                                       cp=Sum("credits_pending"), dp=Sum("debits_pending"))
    assert (totals["c"] or 0) == (totals["d"] or 0), "balances do not sum to zero"
    assert (totals["cp"] or 0) == (totals["dp"] or 0), "pending sides differ"
    for hold in Hold.objects.all():
        moved = hold.transfers.values("kind").annotate(n=Sum("amount"))
        by_kind = {row["kind"]: row["n"] for row in moved}
        assert by_kind.get("HOLD") == hold.amount, hold
        assert by_kind.get("POST", 0) == hold.posted and by_kind.get("VOID", 0) == hold.voided
        assert by_kind.get("REFUND", 0) == hold.refunded <= hold.posted
        assert hold.posted + hold.voided <= hold.amount
        if hold.closed_at:
            assert hold.posted + hold.voided == hold.amount, hold


def wallet_of(org, bucket: str = "paid") -> Account:
    return Account.objects.get(organization=org, bucket=bucket)
