"""A move on a job that may lose the race to another (a round placing it, a node starting or
ending it): read the job again and try again, a few times, then tell the caller to."""

from __future__ import annotations

from collections.abc import Callable

from jobs.models import Job
from jobs.services.errors import Conflict
from jobs.transitions import LostRace

TRIES = 5


def on_fresh_job(act: Callable[[Job], Job], job: Job) -> Job:
    """`act(job)`, again on the job as it is now each time it loses a race; `409 busy` once
    it has lost TRIES of them."""
    for _ in range(TRIES):
        try:
            return act(job)
        except LostRace:
            job = Job.objects.get(pk=job.pk)
    raise Conflict(f"job {job.pk} keeps changing; try again", code="busy")
