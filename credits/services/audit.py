"""Check the books: every account's sums against its transfers, every hold against its own,
and the whole ledger against zero. For operators (`manage.py audit_ledger`) and tests."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import F, Sum

from credits.models import Account, Hold, Transfer

_SUMS = ("credits_posted", "debits_posted", "credits_pending", "debits_pending")
_PENDING_SIGN = {Transfer.Kind.HOLD: 1, Transfer.Kind.POST: -1, Transfer.Kind.VOID: -1}
_NOT_POSTED = (Transfer.Kind.HOLD, Transfer.Kind.VOID)


def _sums_from_transfers() -> dict[int, dict[str, int]]:
    sums: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(_SUMS, 0))
    rows = Transfer.objects.values("kind", "debit_id", "credit_id").annotate(n=Sum("amount"))
    for row in rows:
        kind, amount = row["kind"], row["n"]
        if kind in _PENDING_SIGN:
            sums[row["debit_id"]]["debits_pending"] += _PENDING_SIGN[kind] * amount
            sums[row["credit_id"]]["credits_pending"] += _PENDING_SIGN[kind] * amount
        if kind not in _NOT_POSTED:
            sums[row["debit_id"]]["debits_posted"] += amount
            sums[row["credit_id"]]["credits_posted"] += amount
    return sums


def _hold_problems() -> list[str]:
    problems = []
    moved = {(r["hold_id"], r["kind"]): r["n"] for r in Transfer.objects.filter(
        hold__isnull=False).values("hold_id", "kind").annotate(n=Sum("amount"))}
    for hold in Hold.objects.all().iterator():
        got = {k: moved.get((hold.pk, k), 0) for k in ("HOLD", "POST", "VOID", "REFUND")}
        want = {"HOLD": hold.amount, "POST": hold.posted, "VOID": hold.voided,
                "REFUND": hold.refunded}
        if got != want:
            problems.append(f"hold {hold.pk}: its transfers say {got}, its row {want}")
    return problems


def audit_ledger() -> list[str]:
    """Every inconsistency found; an empty list when the books are right."""
    problems = []
    sums = _sums_from_transfers()
    for account in Account.objects.all().iterator():
        stored = {name: getattr(account, name) for name in _SUMS}
        if stored != sums.get(account.pk, dict.fromkeys(_SUMS, 0)):
            problems.append(f"{account}: stored {stored}, transfers {dict(sums[account.pk])}")
    below = Account.objects.filter(kind=Account.Kind.WALLET,
                                   credits_posted__lt=F("debits_posted") + F("debits_pending"))
    problems += [f"{a}: below zero" for a in below]
    totals = Account.objects.aggregate(*(Sum(name) for name in _SUMS))
    posted = (totals["credits_posted__sum"] or 0) - (totals["debits_posted__sum"] or 0)
    pending = (totals["credits_pending__sum"] or 0) - (totals["debits_pending__sum"] or 0)
    if posted or pending:
        problems.append(f"the ledger does not sum to zero: posted {posted}, pending {pending}")
    return problems + _hold_problems()
