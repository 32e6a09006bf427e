"""Webhooks: an organization's endpoints, and each notice owed to one of them (an outbox row
written with the job's end, in the same transaction, so no end goes unannounced)."""

from __future__ import annotations

import secrets

from django.core.exceptions import ValidationError
from django.db import models


def _new_secret() -> str:
    return secrets.token_hex(32)


# what an endpoint may subscribe to: "job." + the state a job moves into. SCHEDULED and
# QUEUED are not offered: they are the tick's hundreds of moves a round
ENDED_EVENTS = ("job.succeeded", "job.failed", "job.timed_out", "job.cancelled", "job.dead")
# job.held: someone holds it out of the queue (a job HELD behind others is submitted so)
# job.erased: its content was erased (jobs/services/erasure.py): copies elsewhere go too
JOB_EVENTS = (*ENDED_EVENTS, "job.running", "job.preempting", "job.retry_wait", "job.held",
              "job.erased")
ORGANIZATION_EVENTS = ("organization.suspended", "organization.resumed")
# credits.refunded: an operator gave back what a job spent (credits/services/refunds.py)
EVENTS = (*JOB_EVENTS, "credits.low", "credits.refunded", *ORGANIZATION_EVENTS)


def _ended_events() -> list[str]:
    return list(ENDED_EVENTS)


class WebhookEndpoint(models.Model):
    organization = models.ForeignKey("jobs.Organization", on_delete=models.CASCADE,
                                     related_name="webhooks")
    url = models.URLField(max_length=500, help_text="Receives a signed POST when a job moves.")
    secret = models.CharField(max_length=64, default=_new_secret, editable=False,
                              help_text="Signs each delivery (HMAC-SHA256); the receiver "
                                        "checks it.")
    # the secret before the last rotation, which signs too until `previous_secret_until`,
    # while receivers move to the new one
    previous_secret = models.CharField(max_length=64, blank=True, editable=False)
    previous_secret_until = models.DateTimeField(null=True, blank=True, editable=False)
    active = models.BooleanField(default=True)
    events = models.JSONField(default=_ended_events, blank=True,
                              help_text=f"What it is told of, among {', '.join(EVENTS)}.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.organization} → {self.url}"

    def signing_secrets(self, now) -> list[str]:
        """The secrets a delivery is signed with now: the current one first."""
        if self.previous_secret and self.previous_secret_until and (
                now < self.previous_secret_until):
            return [self.secret, self.previous_secret]
        return [self.secret]

    def clean(self) -> None:
        unknown = [e for e in self.events or [] if e not in EVENTS] if isinstance(
            self.events, list) else [self.events]
        if unknown or not self.events:
            raise ValidationError({"events": f"a list of some of: {', '.join(EVENTS)}"})


class WebhookDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "PENDING"
        DELIVERED = "DELIVERED"
        FAILED = "FAILED"  # every attempt refused or unreachable: given up

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE,
                                 related_name="deliveries")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.CASCADE,
                            related_name="+", help_text="Empty for an organization's notice.")
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    # a pending delivery is due from this time; a sender claims it by moving it forward
    next_attempt_at = models.DateTimeField()
    last_error = models.CharField(max_length=300, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["next_attempt_at"], name="webhook_due_idx",
                                condition=models.Q(status="PENDING")),
                   # the hourly sweep reads exactly the ended ones, oldest first
                   models.Index(fields=["created_at"], name="webhook_ended_idx",
                                condition=~models.Q(status="PENDING"))]

    def __str__(self) -> str:
        about = f" of job {self.job_id}" if self.job_id else ""
        return f"{self.event}{about} → {self.endpoint.url} ({self.status})"
