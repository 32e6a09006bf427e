"""How far a running job is, as its binary last said on a heartbeat, and where the pace of
its run so far would end it: what a client shows its user ("47%, about 2 min left") without
reading the job's attempts."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from jobs.models import Attempt, Job
from jobs.states import LIVE

MIN_FRACTION = 0.05  # before this, the pace says too little to say when it ends


def progress_of(jobs: Iterable[Job], now: datetime) -> dict[int, dict]:
    """job id -> `{fraction, estimated_end}` for each of `jobs` whose binary runs now; one
    query for a page of jobs."""
    running = {job.pk: job for job in jobs if job.state in LIVE}
    out: dict[int, dict] = {}
    for job_id, fraction, started in Attempt.objects.filter(
            job_id__in=list(running), ended_at__isnull=True, started_at__isnull=False
    ).values_list("job_id", "progress", "started_at"):
        out[job_id] = {"fraction": round(fraction, 4),
                       "estimated_end": _estimated_end(running[job_id], fraction, started,
                                                       now)}
    return out


def _estimated_end(job: Job, fraction: float, started: datetime, now: datetime
                   ) -> datetime | None:
    """Where the pace of its run so far ends it, never past its time limit; None before
    MIN_FRACTION, and for a try that resumed part-way (its pace since its own start is not
    its fraction's)."""
    if fraction < MIN_FRACTION or job.preemptions or job.retries:
        return None
    at_pace = started + timedelta(seconds=(now - started).total_seconds() / fraction)
    return min(at_pace, started + timedelta(seconds=job.time_limit_s))
