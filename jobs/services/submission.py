"""Intake: turn a validated request into a QUEUED job."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from credits.services.holds import hold_for_job
from jobs.models import Job, Organization, Project
from jobs.models.job import MAX_START_WITHIN_S, MAX_URGENCY_S
from jobs.scheduler.trigger import request_tick
from jobs.services.admission import admit
from jobs.services.dependencies import dependencies_of, held_reason
from jobs.services.erasure import erased
from jobs.services.errors import Conflict, ValidationFailed
from jobs.services.labels import check_labels
from jobs.services.params import check_params
from jobs.services.storable import unstorable
from jobs.services.suspension import refuse_if_suspended
from jobs.states import JobState
from jobs.transitions import record_creation


@dataclass(frozen=True)
class JobSpec:
    prompt: str
    gpus: int = 1
    min_gpus: int | None = None  # the job accepts this few GPUs (a what-if, never run so)
    params: dict = field(default_factory=dict)
    gpu_types: tuple[str, ...] = ()
    min_gpu_memory_mb: int = 0
    region: str = ""
    time_limit_s: int | None = None
    checkpointable: bool = False
    preemptible: bool = True
    project: str = ""
    urgency_s: int = 0  # ahead of the submitter's own jobs as if this much older
    max_retries: int | None = None  # after lost or failed attempts; None: the service's
    after: tuple[int, ...] = ()  # jobs of the organization that must succeed first
    after_mode: str = "succeeded"  # or "ended": they need only end, however they end
    labels: dict = field(default_factory=dict)  # the client's names for it
    start_within_s: int | None = None  # cancelled if not started this long after submission


def _project_for(org: Organization, name: str) -> Project:
    if not name:
        project, _ = Project.objects.get_or_create(organization=org, name="default")
        return project
    try:
        return Project.objects.get(organization=org, name=name)
    except Project.DoesNotExist:
        raise ValidationFailed(f"no project {name!r} in this organization",
                               code="unknown_project", field="project") from None


_INT_MAX = 2**31 - 1  # what an integer column holds


MAX_GPU_TYPES, MAX_GPU_TYPE_CHARS = 8, 40


def check_gpu_types(gpu_types: object) -> None:
    """A list of up to MAX_GPU_TYPES names, as the API takes it. The policy hashes and joins
    them each round: another shape (a number, a list of lists) from a form that did not
    check it would fail every round, for the whole fleet, until the job left the queue."""
    if not isinstance(gpu_types, list | tuple) or len(gpu_types) > MAX_GPU_TYPES or not all(
            isinstance(t, str) and 0 < len(t) <= MAX_GPU_TYPE_CHARS for t in gpu_types):
        raise ValidationFailed(f"gpu_types must be a list of up to {MAX_GPU_TYPES} GPU type "
                               f"names, each 1 to {MAX_GPU_TYPE_CHARS} characters",
                               code="invalid_gpu_types", field="gpu_types")


def check_limits(spec: JobSpec) -> int:
    """Refuse a spec past the service's limits; its time limit, the default if it has none."""
    if not 0 <= spec.min_gpu_memory_mb <= _INT_MAX:
        raise ValidationFailed(f"min_gpu_memory_mb must be 0..{_INT_MAX}",
                               code="min_gpu_memory_out_of_range", field="min_gpu_memory_mb")
    bad = unstorable(spec.params)
    if bad:
        raise ValidationFailed(f"params holds {bad}, a character no job can store",
                               code="params_not_storable", field="params")
    check_params(spec.params)
    check_labels(spec.labels)
    check_gpu_types(spec.gpu_types)
    if not 1 <= spec.gpus <= settings.GPUSCHED_MAX_GPUS_PER_JOB:
        raise ValidationFailed(
            f"gpus must be 1..{settings.GPUSCHED_MAX_GPUS_PER_JOB}", code="gpus_out_of_range",
            field="gpus")
    if not 0 <= spec.urgency_s <= MAX_URGENCY_S:
        raise ValidationFailed(f"urgency_s must be 0..{MAX_URGENCY_S}",
                               code="urgency_out_of_range", field="urgency_s")
    if spec.max_retries is not None and not 0 <= spec.max_retries <= (
            settings.GPUSCHED_MAX_RETRIES):
        raise ValidationFailed(f"max_retries must be 0..{settings.GPUSCHED_MAX_RETRIES}",
                               code="max_retries_out_of_range", field="max_retries")
    if spec.start_within_s is not None and not 1 <= spec.start_within_s <= MAX_START_WITHIN_S:
        raise ValidationFailed(f"start_within_s must be 1..{MAX_START_WITHIN_S}",
                               code="start_within_out_of_range", field="start_within_s")
    if spec.min_gpus is not None and not 1 <= spec.min_gpus <= spec.gpus:
        raise ValidationFailed(f"min_gpus must be 1..{spec.gpus} (gpus)",
                               code="min_gpus_out_of_range", field="min_gpus")
    limit = spec.time_limit_s or settings.GPUSCHED_DEFAULT_TIME_LIMIT_S
    if not 1 <= limit <= settings.GPUSCHED_MAX_TIME_LIMIT_S:
        raise ValidationFailed(
            f"time_limit_s must be 1..{settings.GPUSCHED_MAX_TIME_LIMIT_S}",
            code="time_limit_out_of_range", field="time_limit_s")
    return limit


def locked_organization(organization: Organization) -> Organization:
    """The organization's row, locked (NO KEY) for the rest of the caller's transaction."""
    return (Organization.objects.select_for_update(of=("self",), no_key=True)
            .select_related("tier").get(pk=organization.pk))


def spec_of(job: Job) -> JobSpec:
    """What `job` asks for, as a request would say it."""
    return JobSpec(prompt=job.prompt, gpus=job.gpus, min_gpus=job.min_gpus, params=job.params,
                   gpu_types=tuple(job.gpu_types), min_gpu_memory_mb=job.min_gpu_memory_mb,
                   region=job.region, time_limit_s=job.time_limit_s,
                   checkpointable=job.checkpointable, preemptible=job.preemptible,
                   project=job.project.name, urgency_s=job.urgency_s,
                   max_retries=job.max_retries, labels=job.labels,
                   after=tuple(sorted(job.after.values_list("pk", flat=True))),
                   after_mode=job.after_mode,
                   start_within_s=None if job.start_by is None else
                   round((job.start_by - job.created_at).total_seconds()))


def job_submit(*, organization: Organization, spec: JobSpec, user=None,
               reason: str = "submitted") -> Job:
    """Accept a job: it is QUEUED and visible once this returns (invariant 1), or refuse it
    with a ServiceError (admission: jobs/services/admission.py) and queue nothing. `reason`
    is its first event's."""
    return job_submit_once(organization=organization, spec=spec, user=user, reason=reason)[0]


def job_submit_once(*, organization: Organization, spec: JobSpec, user=None,
                    idempotency_key: str = "", reason: str = "submitted") -> tuple[Job, bool]:
    """`job_submit`, but a request that repeats an earlier one's `idempotency_key` gets that
    job back instead of a new one: (job, True). The same key with another spec is a Conflict.
    """
    with transaction.atomic():
        # one submission of an organization at a time past this point, so that its queue
        # limit, its budgets and its credits hold and a repeated key finds its job; the tier's
        # row stays unlocked. NO KEY UPDATE: rows that merely refer to the organization (a new
        # wallet, whose foreign key PostgreSQL checks at commit) must not wait for it, or a
        # grant that holds system:issuance would wait here while this waits for its wallet
        org = locked_organization(organization)
        fingerprint = _fingerprint(spec) if idempotency_key else ""
        if idempotency_key:
            earlier = Job.objects.filter(organization=org, idempotency_key=idempotency_key).first()
            if earlier is not None:
                if refusal := erased(earlier):  # its request is forgotten: nothing to compare
                    raise refusal
                if earlier.request_fingerprint != fingerprint:
                    raise Conflict("this Idempotency-Key was used for another request",
                                   code="idempotency_key_reused")
                return earlier, True
        refuse_if_suspended(org)
        time_limit = check_limits(spec)
        admit(org)
        after, waiting = dependencies_of(org, spec.after, spec.after_mode)
        now = timezone.now()
        job = Job.objects.create(
            state=JobState.HELD if waiting else JobState.QUEUED,
            organization=org,
            project=_project_for(org, spec.project),
            submitted_by=user,
            prompt=spec.prompt,
            params=spec.params,
            labels=spec.labels,
            gpus=spec.gpus,
            min_gpus=spec.min_gpus,
            gpu_types=list(spec.gpu_types),
            min_gpu_memory_mb=spec.min_gpu_memory_mb,
            region=spec.region,
            time_limit_s=time_limit,
            checkpointable=spec.checkpointable,
            preemptible=spec.preemptible,
            urgency_s=spec.urgency_s,
            max_retries=spec.max_retries,
            enqueued_at=now,
            start_by=None if spec.start_within_s is None else
            now + timedelta(seconds=spec.start_within_s),
            pending_code="dependency" if waiting else "new",
            after_mode=spec.after_mode,
            pending_reason=held_reason(waiting, spec.after_mode) if waiting else
            "waiting for the next scheduling round",
            idempotency_key=idempotency_key,
            request_fingerprint=fingerprint,
        )
        job.after.set(after)
        hold_for_job(job)  # a refusal (402) rolls the job back with the rest
        record_creation(job, reason)
        transaction.on_commit(request_tick)
    return job, False


def _fingerprint(spec: JobSpec) -> str:
    """What the request asked for, so that a reused key with another request is caught."""
    fields = asdict(spec)
    # fields absent from requests made before they existed leave those requests' prints as
    # they were, so that a retry still finds its job
    fields["after"] = sorted(set(spec.after))
    for name, default in (("min_gpus", None), ("urgency_s", 0), ("max_retries", None),
                          ("after", []), ("labels", {}), ("start_within_s", None),
                          ("after_mode", "succeeded")):
        if fields[name] == default:
            del fields[name]
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
