"""What a project's jobs, and the fleet's, have run for by GPU count: the run time predicted
for jobs that come without an estimate (jobs/policy/runtimes.py)."""

from __future__ import annotations

from django.db import models

from jobs.policy.runtimes import RunTimes


class RunTimeStat(models.Model):
    """The statistics of the logarithm of a project's successful one-attempt run times at
    one GPU count; the row without a project holds the whole fleet's, which a project without
    enough history of its own falls back to. The tick folds each ended attempt once (with
    the usage accounts, jobs/scheduler/usage.py) and reads these rows each round."""

    project = models.ForeignKey("jobs.Project", null=True, blank=True,
                                on_delete=models.CASCADE, related_name="run_times")
    gpus = models.PositiveSmallIntegerField()
    runs = models.PositiveIntegerField(default=0)
    mean_log = models.FloatField(default=0.0)
    var_log = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # partial, as for the usage accounts: the fold's insert relies on a conflict
        constraints = [
            models.UniqueConstraint(fields=["project", "gpus"], name="run_time_per_project",
                                    condition=models.Q(project__isnull=False)),
            models.UniqueConstraint(fields=["gpus"], name="run_time_of_the_fleet",
                                    condition=models.Q(project__isnull=True)),
        ]

    def __str__(self) -> str:
        expected = self.expected_s()
        told = f"{expected:.0f} s expected" if expected is not None else "too few runs"
        whose = self.project if self.project_id else "the fleet"
        return f"{whose} on {self.gpus} GPU(s): {told} ({self.runs} runs)"

    def stats(self) -> RunTimes:
        return RunTimes(self.runs, self.mean_log, self.var_log)

    def expected_s(self) -> float | None:
        return self.stats().expected_s()
