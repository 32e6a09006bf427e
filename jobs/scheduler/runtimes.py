"""Run times learned from history (jobs/policy/runtimes.py): folded once per ended attempt
with the usage accounts, read by every round for the jobs that give no estimate.

Each run teaches its project's statistics at its GPU count and the fleet's (the row without
a project), which a project with too few runs of its own falls back to: planned by the hour
limit while others are planned by minutes, a new project's jobs would be left out of every
backfill hole that established projects fit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from django.db.models import Q

from jobs.models import RunTimeStat
from jobs.policy.runtimes import RunTimes

FLEET = 0  # the project id under which load_run_times gives the fleet's (ids start at 1)
Key = tuple[int, int]  # (project id or FLEET, GPUs)


def fold_run_times(runs: Iterable[tuple[int, int, float]]) -> None:
    """Add these (project id, GPUs, seconds) runs, oldest first, to their project's and the
    fleet's statistics.

    Called inside the usage fold's transaction, which marks the attempts it folds: each run
    is added once. Rows are locked in one order, so concurrent folds wait, never deadlock.
    """
    added: dict[tuple[int | None, int], list[float]] = defaultdict(list)
    for project, gpus, seconds in runs:
        added[project, gpus].append(seconds)
        added[None, gpus].append(seconds)
    if not added:
        return
    RunTimeStat.objects.bulk_create([RunTimeStat(project_id=p, gpus=g) for p, g in added],
                                    ignore_conflicts=True)
    projects = {p for p, _ in added if p is not None}
    rows = RunTimeStat.objects.select_for_update().filter(
        Q(project_id__in=projects) | Q(project__isnull=True)).order_by("pk")
    for row in rows:
        seconds = added.get((row.project_id, row.gpus))
        if seconds is None:  # another GPU count
            continue
        stats = row.stats()
        for value in seconds:
            stats.add(value)
        row.runs, row.mean_log, row.var_log = stats.runs, stats.mean_log, stats.var_log
        row.save(update_fields=["runs", "mean_log", "var_log", "updated_at"])


def load_run_times() -> dict[Key, float]:
    """The expected run time of a job of each (project id, GPUs) with enough history, and
    of the fleet's at each GPU count under (FLEET, GPUs)."""
    found = {}
    for project, gpus, runs, mean_log, var_log in RunTimeStat.objects.values_list(
            "project_id", "gpus", "runs", "mean_log", "var_log"):
        expected = RunTimes(runs, mean_log, var_log).expected_s()
        if expected is not None:
            found[project or FLEET, gpus] = expected
    return found


def run_time_of(run_times: Mapping[Key, float], project: int, gpus: int) -> float | None:
    """A job's learned run time: its project's at its GPU count, else the fleet's."""
    learned = run_times.get((project, gpus))
    return learned if learned is not None else run_times.get((FLEET, gpus))
