"""Run times learned from history, for jobs whose client gives no estimate.

Backfill, reservations, hysteresis, the work ahead in line and a tier's backlog all want a
job's run time. A client may send one (`params.expected_duration_s`); most send none, and
the time limit stands in, often ten times the run (video jobs run 20 s to 10 min under a
default limit of an hour). So the service learns the run times of each project's jobs by
GPU count from the jobs that ran to success in one attempt, and predicts the mean.

Run times are skewed (lognormal, near enough), so the statistics are of their logarithm: an
exponentially weighted mean and variance over about the last `WINDOW` runs, so that a
project whose jobs change is followed within a few dozen runs. The prediction is the
lognormal's mean, exp(mu + sigma^2 / 2), which is what sums of work (the work ahead, a
backlog) need, and sits above the median that a reservation would rather not undershoot;
but never above the 95th percentile, exp(mu + 1.645 sigma), which the mean passes once
sigma > 3.3 (run times spread over decades, where the mean is a few outliers' say).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

P95_Z = 1.645  # the standard normal's 95th percentile
WINDOW = 20  # runs: the newest weighs 1/20 once a project has this many
MIN_RUNS = 3  # fewer, and the time limit stands in


@dataclass(slots=True)
class RunTimes:
    """A project's run times at one GPU count, as the statistics of their logarithm."""

    runs: int = 0
    mean_log: float = 0.0
    var_log: float = 0.0

    def add(self, seconds: float) -> None:
        """Take one more successful run (Welford's update, weighted 1/WINDOW past WINDOW)."""
        x = math.log(max(seconds, 1.0))
        self.runs += 1
        weight = 1.0 / min(self.runs, WINDOW)
        delta = x - self.mean_log
        self.mean_log += weight * delta
        self.var_log = (1.0 - weight) * (self.var_log + weight * delta * delta)

    def expected_s(self) -> float | None:
        """The mean run time the statistics imply, or None while they rest on too few runs."""
        if self.runs < MIN_RUNS:
            return None
        spread = min(self.var_log / 2.0, P95_Z * math.sqrt(self.var_log))
        return math.exp(self.mean_log + spread)
