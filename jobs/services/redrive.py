"""Run a job that ended badly again, as a new job with the same spec: how an operator empties
the dead letters once the cause is fixed. The old job keeps its end and its history (an ended
job never changes state); the new one's first event names it."""

from __future__ import annotations

from jobs.models import Job
from jobs.services.erasure import erased
from jobs.services.errors import Conflict
from jobs.services.submission import job_submit, spec_of
from jobs.states import JobState

REDRIVABLE = (JobState.DEAD, JobState.FAILED, JobState.TIMED_OUT)


def job_redrive(*, job: Job, by: str) -> Job:
    """A new QUEUED job like `job` (dead-lettered, failed or timed out), through admission."""
    if job.state not in REDRIVABLE:
        raise Conflict(f"job {job.pk} is {job.state}: only a dead, failed or timed-out job "
                       f"runs again", code="not_redrivable")
    if refusal := erased(job):
        raise refusal
    spec = spec_of(job)
    return job_submit(organization=job.organization, spec=spec, user=job.submitted_by,
                      reason=f"run again from job {job.pk} ({job.state}) by {by}")
