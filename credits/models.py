"""The credit ledger: accounts, immutable transfers between them, and holds.

Double entry: every transfer debits one account and credits another by the same amount, so
the balances of all accounts always sum to zero. An organization's credits sit in wallet
buckets (paid, promotional); the house's side is a few system accounts. The database itself
refuses a wallet that would go below zero (`wallet_never_below_zero`) and a hold that would
post or void more than it reserved.

Balances follow the pending/posted split: a hold moves credits into `debits_pending` of the
wallet (no longer spendable, not yet spent); posting moves them to `debits_posted`, voiding
gives them back.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q


class Account(models.Model):
    class Kind(models.TextChoices):
        WALLET = "WALLET"  # an organization's credits
        SYSTEM = "SYSTEM"  # the house: where grants come from, where spent credits go

    class Bucket(models.TextChoices):
        PAID = "paid"
        PROMO = "promo"  # granted for free, usually with an expiry; spent first

    kind = models.CharField(max_length=8, choices=Kind.choices)
    organization = models.ForeignKey("jobs.Organization", null=True, blank=True,
                                     on_delete=models.PROTECT, related_name="credit_accounts")
    bucket = models.CharField(max_length=8, choices=Bucket.choices, blank=True)
    code = models.SlugField(max_length=40, blank=True, help_text="A system account's name.")
    expires_at = models.DateTimeField(null=True, blank=True)
    spend_priority = models.SmallIntegerField(default=100, help_text="Lower is spent first.")
    credits_posted = models.BigIntegerField(default=0)
    debits_posted = models.BigIntegerField(default=0)
    credits_pending = models.BigIntegerField(default=0)
    debits_pending = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # invariant 5: no bucket goes below zero, held credits included
            models.CheckConstraint(
                condition=~Q(kind="WALLET")
                | Q(credits_posted__gte=F("debits_posted") + F("debits_pending")),
                name="wallet_never_below_zero"),
            models.CheckConstraint(
                condition=Q(credits_posted__gte=0, debits_posted__gte=0, credits_pending__gte=0,
                            debits_pending__gte=0),
                name="account_sums_not_negative"),
            models.CheckConstraint(
                condition=Q(kind="WALLET", organization__isnull=False)
                | Q(kind="SYSTEM", organization__isnull=True),
                name="wallets_belong_to_an_organization"),
            models.UniqueConstraint(fields=["code"], condition=Q(kind="SYSTEM"),
                                    name="one_system_account_per_code"),
            models.UniqueConstraint(fields=["organization"], condition=Q(bucket="paid"),
                                    name="one_paid_bucket_per_organization"),
        ]

    def __str__(self) -> str:
        if self.kind == self.Kind.SYSTEM:
            return f"system:{self.code}"
        return f"{self.organization}:{self.bucket}#{self.pk}"

    @property
    def balance(self) -> int:
        return self.credits_posted - self.debits_posted

    @property
    def available(self) -> int:
        return self.balance - self.debits_pending


class Hold(models.Model):
    """Credits a job reserved in one wallet at submission. Metering posts from it; its end
    voids the rest, once (`closed_at`). Credits refunded after posting go back to the wallet.
    """

    job = models.ForeignKey("jobs.Job", on_delete=models.PROTECT, related_name="credit_holds")
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="holds")
    amount = models.BigIntegerField()
    posted = models.BigIntegerField(default=0)
    voided = models.BigIntegerField(default=0)
    refunded = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(amount__gt=0, posted__gte=0, voided__gte=0, refunded__gte=0)
                & Q(amount__gte=F("posted") + F("voided")) & Q(posted__gte=F("refunded")),
                name="hold_moves_at_most_what_it_holds"),
            models.CheckConstraint(
                condition=Q(closed_at__isnull=True) | Q(amount=F("posted") + F("voided")),
                name="closed_hold_is_spent_or_voided"),
        ]
        indexes = [models.Index(fields=["job"], name="hold_open_idx",
                                condition=Q(closed_at__isnull=True))]

    def __str__(self) -> str:
        return f"hold {self.pk} of job {self.job_id}: {self.amount}"

    @property
    def remaining(self) -> int:
        return self.amount - self.posted - self.voided


class Transfer(models.Model):
    """One movement of credits. Never updated or deleted (a trigger refuses it in
    PostgreSQL); corrections are new transfers."""

    class Kind(models.TextChoices):
        GRANT = "GRANT"  # system:issuance → wallet
        HOLD = "HOLD"  # wallet → system:usage, pending
        POST = "POST"  # of a hold: the pending credits are spent
        VOID = "VOID"  # of a hold: the pending credits are back in the wallet
        REFUND = "REFUND"  # system:usage → wallet, of credits posted for a job
        EXPIRE = "EXPIRE"  # wallet → system:expired, what an expired bucket had left

    kind = models.CharField(max_length=8, choices=Kind.choices)
    debit = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    credit = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="+")
    amount = models.BigIntegerField()
    hold = models.ForeignKey(Hold, null=True, blank=True, on_delete=models.PROTECT,
                             related_name="transfers")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.PROTECT,
                            related_name="+")
    attempt = models.ForeignKey("jobs.Attempt", null=True, blank=True,
                                on_delete=models.PROTECT, related_name="+")
    idempotency_key = models.CharField(max_length=255, blank=True)
    memo = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="transfer_amount_positive"),
            models.CheckConstraint(condition=~Q(debit=F("credit")),
                                   name="transfer_between_two_accounts"),
            models.UniqueConstraint(fields=["idempotency_key"],
                                    condition=~Q(idempotency_key=""),
                                    name="transfer_idempotency_key_unique"),
            # a hold is voided exactly once
            models.UniqueConstraint(fields=["hold"], condition=Q(kind="VOID"),
                                    name="one_void_per_hold"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.amount}: {self.debit} → {self.credit}"


class GpuPrice(models.Model):
    """What a GPU of one type costs. A type without a price costs nothing, so a fleet without
    prices runs without credits."""

    gpu_type = models.CharField(max_length=40, unique=True)
    credits_per_gpu_hour = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.gpu_type}: {self.credits_per_gpu_hour}/GPU-h"


class Budget(models.Model):
    """A monthly cap on the credits that jobs of one project, or of one member, may commit:
    what their holds reserve less what was voided or refunded, for the jobs submitted in the
    calendar month (UTC). Without a project or a user it caps the whole organization."""

    organization = models.ForeignKey("jobs.Organization", on_delete=models.CASCADE,
                                     related_name="credit_budgets")
    project = models.ForeignKey("jobs.Project", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="credit_budgets")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="credit_budgets")
    monthly_limit = models.BigIntegerField(help_text="Credits a calendar month.")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(monthly_limit__gte=0),
                                   name="budget_limit_not_negative"),
            models.CheckConstraint(condition=Q(project__isnull=True) | Q(user__isnull=True),
                                   name="budget_for_a_project_or_a_user"),
            models.UniqueConstraint(fields=["project"], condition=Q(project__isnull=False),
                                    name="one_budget_per_project"),
            models.UniqueConstraint(fields=["organization", "user"],
                                    condition=Q(user__isnull=False),
                                    name="one_budget_per_member"),
            models.UniqueConstraint(fields=["organization"],
                                    condition=Q(project__isnull=True, user__isnull=True),
                                    name="one_budget_per_organization"),
        ]

    def __str__(self) -> str:
        return f"{self.scope}: {self.monthly_limit}/month"

    @property
    def scope(self) -> str:
        if self.project_id:
            return f"project {self.project}"
        if self.user_id:
            return f"member {self.user}"
        return f"organization {self.organization}"
