"""Credits in and out of the organizations' wallets: grants, and the expiry of promotions."""

from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F

from credits.models import Account, Transfer
from credits.services.alerts import watch_low_credits
from credits.services.ledger import EXPIRED, ISSUANCE, lock_wallets, record, system_account
from jobs.models import Organization
from jobs.services.audit import audit
from jobs.services.errors import Conflict, ValidationFailed

PROMO_SPEND_PRIORITY = 0  # promotional credits are spent before paid ones
PAID_SPEND_PRIORITY = 100


def grant_key(organization: Organization, key: str) -> str:
    """The idempotency key an operator's grant is recorded under, from admin or a script:
    their key (an invoice id) for this organization, so one key may grant to several at
    once, and the same invoice given twice, by either way, grants once."""
    return f"{key}:{organization.slug}" if key else ""


def credits_grant(*, organization: Organization, amount: int, promo: bool = False,
                  expires_at: datetime | None = None, idempotency_key: str = "",
                  memo: str = "", by=None) -> Transfer:
    """Put `amount` credits in the organization's paid bucket, or in a new promotional bucket
    (with its own expiry), for `by` (an operator; None: a script or the service). A repeated
    `idempotency_key` returns the first grant's transfer. Each grant is in the
    organization's audit trail, as its refunds are."""
    if amount <= 0:
        raise ValidationFailed("amount must be a positive number of credits",
                               code="amount_not_positive", field="amount")
    if expires_at is not None and not promo:
        raise ValidationFailed("only promotional credits expire", code="paid_credits_expire",
                               field="expires_at")
    try:
        with transaction.atomic():
            if idempotency_key:
                earlier = _earlier_grant(idempotency_key, organization, amount, promo)
                if earlier is not None:
                    return earlier
            wallet = _promo_bucket(organization, expires_at) if promo else _paid_bucket(
                organization)
            lock_wallets([wallet.pk])
            watch_low_credits(organization.pk)
            audit(organization, "credits.granted", user=by, credits=amount, promo=promo,
                  expires_at=str(expires_at) if expires_at else None,
                  key=idempotency_key, memo=memo)
            return record(Transfer.Kind.GRANT, system_account(ISSUANCE), wallet, amount,
                          idempotency_key=idempotency_key, memo=memo or "grant")
    except IntegrityError:
        if not idempotency_key:
            raise
        # a concurrent grant with the same key won the unique constraint: it is this one
        earlier = _earlier_grant(idempotency_key, organization, amount, promo)
        if earlier is None:
            raise
        return earlier


def _earlier_grant(key: str, organization: Organization, amount: int,
                   promo: bool) -> Transfer | None:
    earlier = Transfer.objects.filter(idempotency_key=key).select_related("credit").first()
    if earlier is None:
        return None
    if (earlier.kind != Transfer.Kind.GRANT or earlier.amount != amount
            or earlier.credit.organization_id != organization.pk
            or (earlier.credit.bucket == Account.Bucket.PROMO) != promo):
        raise Conflict("this idempotency key was used for another grant",
                       code="idempotency_key_reused")
    return earlier


def _paid_bucket(organization: Organization) -> Account:
    wallet, _ = Account.objects.get_or_create(
        kind=Account.Kind.WALLET, organization=organization, bucket=Account.Bucket.PAID,
        defaults={"spend_priority": PAID_SPEND_PRIORITY})
    return wallet


def _promo_bucket(organization: Organization, expires_at: datetime | None) -> Account:
    return Account.objects.create(kind=Account.Kind.WALLET, organization=organization,
                                  bucket=Account.Bucket.PROMO, expires_at=expires_at,
                                  spend_priority=PROMO_SPEND_PRIORITY)


def expire_buckets(*, now: datetime) -> int:
    """Move what expired buckets have left (and not held) to system:expired. Credits a job
    still holds in such a bucket stay its to spend; what it gives back expires next sweep."""
    due = Account.objects.filter(
        kind=Account.Kind.WALLET, expires_at__lte=now,
        credits_posted__gt=F("debits_posted") + F("debits_pending"),
    ).values_list("pk", flat=True)
    expired = 0
    for wallet_id in list(due):
        with transaction.atomic():
            wallet = lock_wallets([wallet_id])[wallet_id]
            if wallet.available > 0:
                record(Transfer.Kind.EXPIRE, wallet, system_account(EXPIRED), wallet.available,
                       memo=f"bucket expired {wallet.expires_at:%Y-%m-%d %H:%M}")
                watch_low_credits(wallet.organization_id)
                expired += 1
    return expired
