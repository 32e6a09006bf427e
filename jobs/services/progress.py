"""How far a running job is, as its binary last said on a heartbeat, and where the pace of
this try would end it: what a client shows its user ("47%, about 2 min left") without
reading the job's attempts."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from jobs.models import Attempt, Job
from jobs.states import LIVE

MIN_GAIN = 0.02  # of the run seen done between two reports before its pace says anything
OVERDUE = timedelta(minutes=1)  # an end this far past: the binary stopped saying how far it is


def progress_of(jobs: Iterable[Job], now: datetime) -> dict[int, dict]:
    """job id -> `{fraction, estimated_end}` for each of `jobs` whose binary runs now; one
    query for a page of jobs."""
    running = {job.pk: job for job in jobs if job.state in LIVE}
    out: dict[int, dict] = {}
    for job_id, *report in Attempt.objects.filter(
            job_id__in=list(running), ended_at__isnull=True, started_at__isnull=False
    ).values_list("job_id", "progress", "progress_first", "progress_first_at", "progress_at",
                  "started_at"):
        out[job_id] = {"fraction": round(report[0], 4),
                       "estimated_end": _estimated_end(running[job_id], *report, now=now)}
    return out


def _estimated_end(job: Job, fraction: float, first: float | None, first_at: datetime | None,
                   at: datetime | None, started: datetime, *, now: datetime
                   ) -> datetime | None:
    """Where the pace between the try's first report and its latest ends it, never past its
    time limit. None until MIN_GAIN was seen done between two reports, and once the end it
    points to is OVERDUE."""
    if first is None or first_at is None or at is None or fraction - first < MIN_GAIN:
        return None
    pace = (fraction - first) / max((at - first_at).total_seconds(), 1e-3)
    end = min(at + timedelta(seconds=(1.0 - fraction) / pace),
              started + timedelta(seconds=job.time_limit_s))
    return end if end >= now - OVERDUE else None
