"""Change the time limit of a job that started, as Slurm's `scontrol update TimeLimit=` does:
an operator extends a training run that needs longer, and its client may shorten it. A
client may not lengthen it: the scheduler starts jobs in the gaps before the GPUs it
reserves for others, by when running jobs' limits end, and a limit lengthened after the
start would take those GPUs from them (Slurm leaves that to its operators too). A job that
never started changes its limit with the rest of its request (services/amend.py).

The limit is each try's, as at submission; its running try's node learns the new one at its
next heartbeat (workers/agent/runner.py). A limit the running try has already reached is
refused: that is a cancel. A longer limit holds what it may cost more, refused (402) as a
submission is when the credits or a budget do not cover it; a shorter one gives back at once
what the job can no longer cost.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from credits.services.holds import hold_longer_limit, release_beyond_limit
from jobs.models import Attempt, Job
from jobs.services.amend import job_amend
from jobs.services.errors import Conflict, Forbidden, ValidationFailed
from jobs.services.submission import locked_organization
from jobs.states import TERMINAL, JobState
from jobs.transitions import retime


def job_set_time_limit(*, job: Job, time_limit_s: int, by: str, operator: bool = False) -> Job:
    """Set `job`'s time limit to `time_limit_s` for `by`: an operator, or its client, who
    may only shorten a job once it was placed. The job as it is now."""
    if not 1 <= time_limit_s <= settings.GPUSCHED_MAX_TIME_LIMIT_S:
        raise ValidationFailed(f"time_limit_s must be 1..{settings.GPUSCHED_MAX_TIME_LIMIT_S}",
                               code="time_limit_out_of_range", field="time_limit_s")
    placed = Attempt.objects.filter(job=job).exists()
    if not placed and job.state == JobState.QUEUED:  # its request changes, its wait kept
        return job_amend(organization=job.organization, job_id=job.pk,
                         changes={"time_limit_s": time_limit_s})
    with transaction.atomic():
        locked_organization(job.organization)  # its credits' lock order: as a submission
        # its live try's row before the job's, as the try's end and a preemption lock them:
        # either sees the new limit, or this sees the job ended
        list(Attempt.objects.select_for_update(no_key=True).filter(job=job,
                                                                   ended_at__isnull=True))
        job = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
        old = job.time_limit_s
        _check(job, time_limit_s, lengthens=operator or not placed)
        if time_limit_s == old:
            return job
        retime(job, time_limit_s=time_limit_s, reason=f"time limit {old} s → {time_limit_s} s "
               f"by {by}", data={"changed": {"time_limit_s": [old, time_limit_s]}, "by": by})
        if time_limit_s > old:
            hold_longer_limit(job)  # a refusal (402) rolls the change back
        else:
            release_beyond_limit(job)
    return job


def _check(job: Job, time_limit_s: int, lengthens: bool) -> None:
    """Refuse an end, a longer limit that is not `lengthens`'s to set, or a passed one."""
    if job.state in TERMINAL:
        raise Conflict(f"job {job.pk} already ended {job.state}", code="job_finished")
    if time_limit_s > job.time_limit_s and not lengthens:
        raise Forbidden(f"job {job.pk} has started: only an operator lengthens its time "
                        f"limit (the GPUs promised to others would come later); shorten it, "
                        f"or ask an operator", code="time_limit_extension_not_allowed")
    started = Attempt.objects.filter(job=job, ended_at__isnull=True,
                                     started_at__isnull=False).values_list(
        "started_at", flat=True).first()
    ran = (timezone.now() - started).total_seconds() if started else 0.0
    if time_limit_s <= ran:
        raise ValidationFailed(f"its running try has run {ran:.0f} s already: a limit of "
                               f"{time_limit_s} s would end it now; cancel it instead",
                               code="time_limit_passed", field="time_limit_s")
