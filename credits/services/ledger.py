"""Transfers: the only code that changes an account's sums.

Each transfer is one immutable row plus two conditional-free `F()` updates of the accounts it
touches, inside the caller's transaction; the database's checks refuse any that would take a
wallet below zero. Lock order, to keep concurrent ledger work free of deadlocks: a caller
locks its holds, then every wallet it will touch (`lock_wallets`, lowest id first), and only
then records transfers, which lock the system accounts last. Row locks are FOR NO KEY
UPDATE: PostgreSQL checks foreign keys at commit with KEY SHARE locks on the rows referred
to, after every lock above, and those must not wait for a ledger lock.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F

from credits.models import Account, Hold, Transfer

ISSUANCE = "issuance"  # where granted credits come from; its balance is minus all grants
USAGE = "usage"  # what jobs spent (posted) and reserve (pending)
EXPIRED = "expired"  # what expired buckets had left

K = Transfer.Kind
# (debit side, credit side): how each kind moves the two accounts' sums
_DELTAS: dict[str, tuple[dict[str, int], dict[str, int]]] = {
    K.HOLD: ({"debits_pending": 1}, {"credits_pending": 1}),
    K.POST: ({"debits_pending": -1, "debits_posted": 1},
             {"credits_pending": -1, "credits_posted": 1}),
    K.VOID: ({"debits_pending": -1}, {"credits_pending": -1}),
}
_POSTED = ({"debits_posted": 1}, {"credits_posted": 1})  # GRANT, REFUND, EXPIRE


def system_account(code: str) -> Account:
    account, _ = Account.objects.get_or_create(kind=Account.Kind.SYSTEM, code=code)
    return account


def lock_wallets(ids: Iterable[int]) -> dict[int, Account]:
    """Lock these wallets, lowest id first, and return them fresh."""
    wallets = Account.objects.select_for_update(no_key=True).filter(pk__in=set(ids)).order_by("pk")
    return {w.pk: w for w in wallets}


def record(kind: str, debit: Account, credit: Account, amount: int, *,
           hold: Hold | None = None, job_id: int | None = None, attempt_id: int | None = None,
           idempotency_key: str = "", memo: str = "") -> Transfer:
    """Write one transfer and move both accounts' sums by `amount`."""
    debit_deltas, credit_deltas = _DELTAS.get(kind, _POSTED)
    transfer = Transfer.objects.create(
        kind=kind, debit=debit, credit=credit, amount=amount, hold=hold, job_id=job_id,
        attempt_id=attempt_id, idempotency_key=idempotency_key, memo=memo[:200])
    # wallets (locked by the caller) before system accounts
    sides = sorted([(debit, debit_deltas), (credit, credit_deltas)],
                   key=lambda side: (side[0].kind == Account.Kind.SYSTEM, side[0].pk))
    for account, deltas in sides:
        Account.objects.filter(pk=account.pk).update(
            **{name: F(name) + sign * amount for name, sign in deltas.items()})
    return transfer
