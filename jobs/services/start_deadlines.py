"""Start deadlines: a job sent with `start_within_s` that has not started by then is cancelled
(its credits held go back, its webhook and the jobs after it are told), as a client whose
user waits for a video would rather fail fast than get it late. A job that started once keeps
running, and back in the queue after a preemption or a retry it waits as any other."""

from __future__ import annotations

import logging
from datetime import datetime

from jobs.metrics import count_late_start
from jobs.models import Job
from jobs.states import JobState
from jobs.transitions import TransitionError, transition

log = logging.getLogger(__name__)
WAITING = (JobState.QUEUED, JobState.HELD)
BATCH = 500  # jobs one round cancels at most: the round stays short, the next goes on


def cancel_late_starts(*, now: datetime) -> int:
    """Cancel the waiting jobs whose start deadline has passed; returns how many. Run by the
    scheduler's round before it reads the queue, so that no round starts one of them late."""
    late = Job.objects.filter(state__in=WAITING, start_by__lte=now, started_at__isnull=True)
    cancelled = 0
    for job in late.select_related("organization__tier").order_by("start_by")[:BATCH]:
        waited = round((job.start_by - job.created_at).total_seconds())
        try:
            transition(job, JobState.CANCELLED, reason="not started by its deadline",
                       finished_at=now, error_code="start_deadline_passed",
                       error=f"not started within {waited} s of its submission "
                             f"(its start_within_s)")
        except TransitionError as exc:  # cancelled or changed meanwhile: the next round sees
            log.info("start deadline of job %s: %s", job.pk, exc)
            continue
        count_late_start(job.organization.tier.name)
        cancelled += 1
    if cancelled:
        log.info("cancelled %d jobs not started by their deadlines", cancelled)
    return cancelled
