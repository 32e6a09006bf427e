"""Invariant 5 in the database itself: no wallet below zero, transfers that cannot be changed,
holds that cannot move more than they reserved; grants that a retry does not repeat; expiry
that takes only what nobody holds."""

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from credits.models import Account, GpuPrice, Hold, Transfer
from credits.services.audit import audit_ledger
from credits.services.grants import credits_grant, expire_buckets
from credits.services.statements import organization_balance
from jobs.services.cancellation import job_cancel
from jobs.services.errors import Conflict
from jobs.services.submission import JobSpec, job_submit
from tests.support.ledger import assert_ledger_consistent, wallet_of
from tests.support.threads import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_database_refuses_a_wallet_below_zero(alice):
    credits_grant(organization=alice, amount=100)
    wallet = wallet_of(alice)
    with pytest.raises(IntegrityError), transaction.atomic():
        Account.objects.filter(pk=wallet.pk).update(debits_posted=F("debits_posted") + 101)
    with pytest.raises(IntegrityError), transaction.atomic():
        Account.objects.filter(pk=wallet.pk).update(debits_pending=101)
    assert wallet_of(alice).available == 100


def test_a_transfer_can_be_neither_changed_nor_deleted(alice):
    grant = credits_grant(organization=alice, amount=100)
    with pytest.raises(DatabaseError), transaction.atomic():
        Transfer.objects.filter(pk=grant.pk).update(amount=1_000_000)
    with pytest.raises(DatabaseError), transaction.atomic():
        Transfer.objects.filter(pk=grant.pk).delete()
    assert Transfer.objects.get(pk=grant.pk).amount == 100


def test_a_hold_cannot_post_or_void_more_than_it_reserved(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=1_000)
    job = job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=100))
    hold = Hold.objects.get(job=job)
    with pytest.raises(IntegrityError), transaction.atomic():
        Hold.objects.filter(pk=hold.pk).update(posted=60, voided=41)
    with pytest.raises(IntegrityError), transaction.atomic():
        Hold.objects.filter(pk=hold.pk).update(closed_at=timezone.now())  # nothing settled


def test_a_transfer_moves_a_positive_amount_between_two_accounts(alice):
    grant = credits_grant(organization=alice, amount=100)
    for amount, credit in ((0, grant.credit), (-5, grant.credit), (5, grant.debit)):
        with pytest.raises(IntegrityError), transaction.atomic():
            Transfer.objects.create(kind="GRANT", debit=grant.debit, credit=credit, amount=amount)


def test_a_retried_grant_is_granted_once(alice):
    def grant():
        credits_grant(organization=alice, amount=700, idempotency_key="invoice-17")

    race(grant, 6)
    assert Transfer.objects.filter(kind="GRANT").count() == 1
    assert wallet_of(alice).available == 700
    with pytest.raises(Conflict):
        credits_grant(organization=alice, amount=701, idempotency_key="invoice-17")
    assert_ledger_consistent()


def test_racing_grants_and_holds_keep_the_sums(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=2_000)
    jobs = []

    def work():
        credits_grant(organization=alice, amount=50)
        try:
            jobs.append(job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=300)))
        except Exception as exc:  # noqa: BLE001
            assert exc.code == "insufficient_credits"

    race(work, 8)
    for job in jobs[::2]:
        job_cancel(job=job)
    assert_ledger_consistent()
    assert organization_balance(alice)["held"] == 300 * (len(jobs) - len(jobs[::2]))


def test_expiry_takes_what_is_not_held_and_later_what_comes_back(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    soon = timezone.now() + timedelta(seconds=30)
    credits_grant(organization=alice, amount=1_000, promo=True, expires_at=soon)
    job = job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=400))
    later = soon + timedelta(seconds=1)
    assert expire_buckets(now=later) == 1
    promo = wallet_of(alice, "promo")
    assert (promo.available, promo.debits_pending) == (0, 400)  # the job keeps its credits
    assert expire_buckets(now=later) == 0
    job_cancel(job=job)  # its hold comes back to an expired bucket ...
    assert wallet_of(alice, "promo").available == 400
    assert expire_buckets(now=later) == 1  # ... and expires at the next sweep
    assert wallet_of(alice, "promo").available == 0
    expired = Account.objects.get(code="expired")
    assert expired.balance == 1_000
    assert_ledger_consistent()


def test_grants_are_positive_and_only_promotions_expire(alice):
    with pytest.raises(Exception) as zero:
        credits_grant(organization=alice, amount=0)
    assert zero.value.code == "amount_not_positive"
    with pytest.raises(Exception) as paid:
        credits_grant(organization=alice, amount=5, expires_at=timezone.now())
    assert paid.value.code == "paid_credits_expire"
    assert not Transfer.objects.exists()


def test_the_audit_passes_good_books_and_names_what_is_off(alice, capsys):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=1_000)
    job = job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=100))
    call_command("audit_ledger")
    assert "the ledger balances: 2 transfers checked" in capsys.readouterr().out
    # rows changed behind the ledger's back (the checks let these through)
    Account.objects.filter(pk=wallet_of(alice).pk).update(credits_posted=F("credits_posted") + 7)
    Hold.objects.filter(job=job).update(posted=10)
    problems = audit_ledger()
    assert len(problems) == 3, problems
    assert "stored" in problems[0] and "does not sum to zero: posted 7" in problems[1]
    assert problems[2].startswith(f"hold {Hold.objects.get(job=job).pk}:")
    with pytest.raises(CommandError):
        call_command("audit_ledger")
