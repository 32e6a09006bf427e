"""Decayed GPU-time per project and user, kept so that a tick need not scan the attempts'
history."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class UsageAccount(models.Model):
    """GPU-seconds of a project's ended attempts submitted by one user (or by nobody known),
    each decayed from its end, as of `as_of`.

    The tick folds every ended attempt into its account once (`Attempt.usage_counted` marks
    it), so reading usage costs a row per project and user, not a scan of every attempt of
    the last days (jobs/scheduler/usage.py). A project's usage is the sum of its accounts.
    """

    project = models.ForeignKey("jobs.Project", on_delete=models.CASCADE,
                                related_name="usage_accounts")
    # the account of jobs without a known submitter has none (one such account per project)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="+")
    gpu_seconds = models.FloatField(default=0.0)
    as_of = models.DateTimeField()

    class Meta:
        # two partial constraints rather than NULLS NOT DISTINCT, which SQLite (the demo)
        # lacks: the fold's insert relies on a conflict for an account that already exists
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="usage_account_per_user",
                                    condition=models.Q(user__isnull=False)),
            models.UniqueConstraint(fields=["project"], name="usage_account_per_project",
                                    condition=models.Q(user__isnull=True)),
        ]

    def __str__(self) -> str:
        who = f" by {self.user}" if self.user_id else ""
        return (f"usage of {self.project}{who}: {self.gpu_seconds:.0f} GPU-s "
                f"at {self.as_of:%Y-%m-%d}")
