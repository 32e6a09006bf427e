"""What an organization's people changed in it, and who: its keys, webhooks, projects,
weights, budgets and roles. Append-only; read on the dashboard's team page and in admin."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import models


class OrganizationEvent(models.Model):
    organization = models.ForeignKey("jobs.Organization", on_delete=models.CASCADE,
                                     related_name="audit_events")
    at = models.DateTimeField(auto_now_add=True)
    # who: a member on the dashboard, or a client with one of the organization's keys
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="+")
    api_key = models.ForeignKey("jobs.ApiKey", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=40)  # e.g. "budget.set", "webhook.removed"
    detail = models.JSONField(default=dict, blank=True)  # what it changed, from what

    class Meta:
        indexes = [models.Index(fields=["organization", "-id"], name="org_event_newest_idx")]

    def __str__(self) -> str:
        return f"{self.organization.slug}: {self.action} by {self.actor}"

    @property
    def described(self) -> str:
        """The detail in a line: `key: value; ...`, a structured value as JSON."""
        return "; ".join(
            f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}"
            for key, value in self.detail.items())

    @property
    def actor(self) -> str:
        if self.user_id:
            return self.user.get_username()
        return f"key {self.api_key.prefix}…" if self.api_key_id else "an operator"
