"""Change what a waiting job asks for (`PATCH /api/v1/jobs/{id}`), keeping its place.

A pending reason may name a relaxation that would start the job now (another GPU type, fewer
GPUs). Cancelling and submitting again would take it, but the new job would wait from
scratch; amending keeps the job's wait (`enqueued_at`, which ages its rank) and its history.

Only a job that never started may change: one that ran has checkpoints written for the GPUs it
had, and credits posted against its old request. The change is one transaction: the
organization's row (the lock submissions take, which keeps its budgets' checks apart), the
job's row, the job's new request as a compare-and-set (transitions.amend), and its credits
held anew for it, or a refusal that leaves all as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from django.db import transaction

from credits.services.holds import rehold_for_job
from jobs.models import Job, Organization
from jobs.scheduler.trigger import request_tick
from jobs.services.errors import Conflict, NotFound, ValidationFailed
from jobs.services.submission import check_limits, locked_organization, spec_of
from jobs.states import JobState
from jobs.transitions import AMENDABLE, amend


def job_amend(*, organization: Organization, job_id: int, changes: Mapping[str, Any]) -> Job:
    """Apply `changes` (fields of AMENDABLE) to the organization's QUEUED job that has not
    started; the job as it is now. Nothing is written when nothing differs."""
    unknown = sorted(set(changes) - AMENDABLE)
    if unknown:
        raise ValidationFailed(f"only {', '.join(sorted(AMENDABLE))} can change; not "
                               f"{', '.join(unknown)}", code="not_amendable", field=unknown[0])
    with transaction.atomic():
        org = locked_organization(organization)
        job = (Job.objects.select_for_update(of=("self",), no_key=True)
               .select_related("project").filter(pk=job_id, organization=org).first())
        if job is None:
            raise NotFound("no such job")
        if job.state != JobState.QUEUED:
            raise Conflict(f"job {job.pk} is {job.state}: only a waiting job can change",
                           code="job_not_queued")
        if job.attempts.exists():
            raise Conflict(f"job {job.pk} has run before: only a job that never started "
                           "can change", code="job_started")
        changed = _changed(job, changes)
        if not changed:
            return job
        amend(job, reason="changed " + ", ".join(
                  f"{name} {old!r} → {new!r}" for name, (old, new) in changed.items()),
              data={"changed": {name: list(pair) for name, pair in changed.items()}},
              **{name: new for name, (_, new) in changed.items()})
        rehold_for_job(job)  # a refusal (402) rolls the change back with the rest
        transaction.on_commit(request_tick)
    return job


def _changed(job: Job, changes: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{field: (old, new)} for what `changes` makes differ, checked as a submission is."""
    spec = replace(spec_of(job), **{k: tuple(v) if k == "gpu_types" and isinstance(
        v, list | tuple) else v for k, v in changes.items()})  # another shape is refused
    limit = check_limits(spec)  # first: what it refuses may be no list
    new = {**{name: getattr(spec, name) for name in AMENDABLE},
           "gpu_types": list(spec.gpu_types), "time_limit_s": limit}
    return {name: (getattr(job, name), value) for name, value in new.items()
            if getattr(job, name) != value}
