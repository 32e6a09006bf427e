"""Run a job that ended badly again, as a new job with the same spec: how an operator empties
the dead letters once the cause is fixed. The old job keeps its end and its history (an ended
job never changes state); the new one's first event names it."""

from __future__ import annotations

from jobs.models import Job
from jobs.services.erasure import erased
from jobs.services.errors import Conflict
from jobs.services.submission import job_submit_once, spec_of
from jobs.states import JobState

REDRIVABLE = (JobState.DEAD, JobState.FAILED, JobState.TIMED_OUT)


def job_redrive(*, job: Job, by: str) -> Job:
    """A new QUEUED job like `job` (dead-lettered, failed or timed out), through admission."""
    if job.state not in REDRIVABLE:
        raise Conflict(f"job {job.pk} is {job.state}: only a dead, failed or timed-out job "
                       f"runs again", code="not_redrivable")
    if refusal := erased(job):
        raise refusal
    # once a job: an operator's double click, or the action applied again to a list that
    # still shows the job, gets the copy made first (its own prefix among the
    # organization's Idempotency-Keys, as the dashboard's); a copy that ends badly in turn
    # is run again from itself
    again, _ = job_submit_once(organization=job.organization, spec=spec_of(job),
                               user=job.submitted_by, idempotency_key=f"redrive:{job.pk}",
                               reason=f"run again from job {job.pk} ({job.state}) by {by}")
    return again
