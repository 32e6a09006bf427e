"""Learned run times in the simulator (`--estimates learned`): jobs that come without an
estimate are planned by their project's history at their GPU count, else the fleet's, as the
service's tick plans them (jobs/scheduler/runtimes.py, jobs/policy/runtimes.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from jobs.policy.runtimes import RunTimes
from jobs.policy.types import QueuedJob

from .model import SimJob

FLEET = "\0fleet"  # the project under which the fleet's runs are kept (no project is named so)


class LearnedRunTimes:
    def __init__(self) -> None:
        self.stats: dict[tuple[str, int], RunTimes] = defaultdict(RunTimes)

    def learn(self, job: SimJob) -> None:
        """A job that ended: learned from only if it ran start to end in one attempt, as the
        service learns from the attempts that ran a job whole."""
        if job.attempts == 1:
            self.stats[job.project, job.gpus].add(job.duration)
            self.stats[FLEET, job.gpus].add(job.duration)

    def apply(self, jobs: Iterable[SimJob], views: dict[int, QueuedJob]) -> None:
        """Give these jobs (those without a client's estimate) and their queued views the
        run time their project's history predicts now, never past their limit."""
        for job in jobs:
            expected = self._expected(job.project, job.gpus)
            if expected is None:
                expected = self._expected(FLEET, job.gpus)
            job.expected_duration = None if expected is None else min(expected, job.time_limit)
            view = views.get(job.job_id)
            if view is not None:
                view.expected_duration_s = job.expected_duration

    def _expected(self, project: str, gpus: int) -> float | None:
        stats = self.stats.get((project, gpus))
        return stats.expected_s() if stats is not None else None
