"""Run times learned from history (jobs/policy/runtimes.py): folded once per ended attempt
with the usage accounts, read by every round for the jobs that give no estimate."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from jobs.models import RunTimeStat
from jobs.policy.runtimes import RunTimes

Key = tuple[int, int]  # (project id, GPUs)


def fold_run_times(runs: Iterable[tuple[int, int, float]]) -> None:
    """Add these (project id, GPUs, seconds) runs, oldest first, to their statistics.

    Called inside the usage fold's transaction, which marks the attempts it folds: each run
    is added once. Rows are locked in one order, so concurrent folds wait, never deadlock.
    """
    added: dict[Key, list[float]] = defaultdict(list)
    for project, gpus, seconds in runs:
        added[project, gpus].append(seconds)
    if not added:
        return
    RunTimeStat.objects.bulk_create([RunTimeStat(project_id=p, gpus=g) for p, g in added],
                                    ignore_conflicts=True)
    rows = RunTimeStat.objects.select_for_update().filter(
        project_id__in={p for p, _ in added}).order_by("pk")
    for row in rows:
        seconds = added.get((row.project_id, row.gpus))
        if seconds is None:  # another GPU count of the same project
            continue
        stats = row.stats()
        for value in seconds:
            stats.add(value)
        row.runs, row.mean_log, row.var_log = stats.runs, stats.mean_log, stats.var_log
        row.save(update_fields=["runs", "mean_log", "var_log", "updated_at"])


def load_run_times() -> dict[Key, float]:
    """The expected run time of a job of each (project id, GPUs) with enough history."""
    found = {}
    for project, gpus, runs, mean_log, var_log in RunTimeStat.objects.values_list(
            "project_id", "gpus", "runs", "mean_log", "var_log"):
        expected = RunTimes(runs, mean_log, var_log).expected_s()
        if expected is not None:
            found[project, gpus] = expected
    return found
