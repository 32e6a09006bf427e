"""Decayed GPU-time per project, kept so that a tick need not scan the attempts' history."""

from __future__ import annotations

from django.db import models


class UsageAccount(models.Model):
    """A project's GPU-seconds of ended attempts, each decayed from its end, as of `as_of`.

    The tick folds every ended attempt into its project's account once (`Attempt.usage_counted`
    marks it), so reading usage costs a row per project, not a scan of every attempt of the
    last days (jobs/scheduler/usage.py).
    """

    project = models.OneToOneField("jobs.Project", on_delete=models.CASCADE,
                                   related_name="usage_account")
    gpu_seconds = models.FloatField(default=0.0)
    as_of = models.DateTimeField()

    def __str__(self) -> str:
        return f"usage of {self.project}: {self.gpu_seconds:.0f} GPU-s at {self.as_of:%Y-%m-%d}"
