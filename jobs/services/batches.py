"""Many jobs in one request: a client with a thousand prompts sends them ten requests at a
time instead of a thousand, as a Slurm job array does.

A batch is all or nothing: its jobs are submitted one by one, each as a submission alone
would be (admission, limits, budgets, credits held), inside one transaction, and the first
refusal rolls the whole batch back and names the job it refused (`index`), so a client
never has to find out which of its prompts were taken. Its Idempotency-Key makes a key for
each job (`key/0`, `key/1`, ...): a retried batch gets the same jobs back, and the key sent
with another batch is refused as a single job's would be.
"""

from __future__ import annotations

from dataclasses import replace

from django.db import transaction

from jobs.models import Job, Organization
from jobs.services.errors import Conflict, ServiceError, ValidationFailed
from jobs.services.submission import JobSpec, job_submit_once

MAX_BATCH = 100  # jobs a request: the organization's submissions wait for one batch's lock
MAX_BATCH_KEY = 250  # characters: each job's key adds "/" and its index, within 255


def _item_key(key: str, index: int) -> str:
    return f"{key}/{index}" if key else ""


def jobs_submit_batch(*, organization: Organization, specs: list[JobSpec], user=None,
                      idempotency_key: str = "",
                      after_batch: list[tuple[int, ...]] | None = None) -> tuple[list[Job], bool]:
    """Submit `specs` together, in order: (jobs, replayed). `after_batch[i]`: the indices of
    earlier jobs of the batch that job i runs after, besides its own `after` (a pipeline's
    steps sent at once). A ServiceError raised for any of them is raised with `index` added
    to its details, and no job of the batch is kept."""
    if not 1 <= len(specs) <= MAX_BATCH:
        raise ValidationFailed(f"a batch has 1 to {MAX_BATCH} jobs", code="invalid_batch",
                               field="jobs")
    if len(idempotency_key) > MAX_BATCH_KEY:
        raise ValidationFailed(f"a batch's Idempotency-Key is at most {MAX_BATCH_KEY} "
                               f"characters", code="invalid_idempotency_key")
    with transaction.atomic():
        submitted: list[tuple[Job, bool]] = []
        for index, spec in enumerate(specs):
            earlier = _earlier(after_batch[index] if after_batch else (), submitted, index)
            spec = replace(spec, after=(*spec.after, *earlier)) if earlier else spec
            submitted.append(_submit_item(organization, spec, user, idempotency_key, index))
        replayed = {again for _, again in submitted}
        if len(replayed) > 1 or (True in replayed and Job.objects.filter(
                organization=organization,
                idempotency_key=_item_key(idempotency_key, len(specs))).exists()):
            # part of another batch under the same key: neither the same request nor a new one
            raise Conflict("this Idempotency-Key was used for another batch",
                           code="idempotency_key_reused")
    return [job for job, _ in submitted], replayed == {True}


def _earlier(indices: tuple[int, ...], submitted: list[tuple[Job, bool]],
             index: int) -> tuple[int, ...]:
    """The ids of the batch's jobs that job `index` runs after: earlier ones only, so that
    a batch can never wait on itself."""
    if any(not 0 <= i < index for i in indices):
        raise _at(index, ValidationFailed(
            f"job {index} of the batch may run after jobs 0 to {index - 1} of it only",
            code="invalid_after_batch", field="after_batch"))
    return tuple(submitted[i][0].pk for i in indices)


def _at(index: int, exc: ServiceError) -> ServiceError:
    """`exc`, naming the job of the batch it refused."""
    exc.details = {**getattr(exc, "details", {}), "index": index}
    return exc


def _submit_item(organization: Organization, spec: JobSpec, user, key: str,
                 index: int) -> tuple[Job, bool]:
    try:
        return job_submit_once(organization=organization, spec=spec, user=user,
                               idempotency_key=_item_key(key, index),
                               reason=f"submitted in a batch, job {index}")
    except ServiceError as exc:
        raise _at(index, exc) from None
