"""What a project's jobs have run for, by GPU count: the run time predicted for its jobs
that come without an estimate (jobs/policy/runtimes.py)."""

from __future__ import annotations

from django.db import models

from jobs.policy.runtimes import RunTimes


class RunTimeStat(models.Model):
    """The statistics of the logarithm of a project's successful one-attempt run times at
    one GPU count. The tick folds each ended attempt once (with the usage accounts,
    jobs/scheduler/usage.py) and reads these rows each round."""

    project = models.ForeignKey("jobs.Project", on_delete=models.CASCADE,
                                related_name="run_times")
    gpus = models.PositiveSmallIntegerField()
    runs = models.PositiveIntegerField(default=0)
    mean_log = models.FloatField(default=0.0)
    var_log = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "gpus"],
                                               name="run_time_per_project_gpus")]

    def __str__(self) -> str:
        expected = self.expected_s()
        told = f"{expected:.0f} s expected" if expected is not None else "too few runs"
        return f"{self.project} on {self.gpus} GPU(s): {told} ({self.runs} runs)"

    def stats(self) -> RunTimes:
        return RunTimes(self.runs, self.mean_log, self.var_log)

    def expected_s(self) -> float | None:
        return self.stats().expected_s()
