"""Erase what an ended job carried of its users' content, at its client's or an operator's
request: a text-to-video service's prompts and videos are its customers' users' data, and a
user who asks for theirs to go must not have to wait for the outputs' retention.

Gone at once: the prompt, the params, the output file, every try's logs and stderr's end,
the error its binary printed, the stored checkpoints, and the request's fingerprint (a hash
of the prompt would confirm a guess of it). Kept: the row with its state, GPUs, labels (the
client's own names, by which its usage is still added up), history and credits, so the
ledger, the usage reports and the audit still add up. The rows forget the files before the
files go, as outputs expire (services/outputs.py): a failed delete leaves a file nothing
names, never a job naming a file that is gone."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from jobs.models import ApiKey, Attempt, AttemptRank, Job, Organization, StoredCheckpoint
from jobs.services.audit import audit
from jobs.services.errors import Conflict, ValidationFailed
from jobs.services.labels import with_labels
from jobs.services.webhooks import notify_job_erased
from jobs.states import TERMINAL

log = logging.getLogger(__name__)
ERASE_BATCH = 500  # jobs one bulk erase takes at most: a request stays short


class Erased(Conflict):
    code = "job_erased"
    status = 410


def erased(job: Job) -> Erased | None:
    """The refusal for reading what an erased job no longer has, None for one not erased."""
    if job.erased_at is None:
        return None
    return Erased(f"job {job.pk} was erased at {job.erased_at.isoformat()}: its prompt, "
                  "output and logs are gone")


def job_erase(*, job: Job, user=None, api_key: ApiKey | None = None, note: str = "",
              audited: bool = True) -> Job:
    """Erase `job`'s content for `user` (a member, an operator) or `api_key` (a client),
    recorded in its organization's audit trail unless not `audited` (its retention's sweep
    records its own); the job as it is now. Erasing it again changes nothing; a job that
    has not ended is refused (`job_not_finished`): its binary still reads its prompt and
    writes its output."""
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)  # as it is, not as it was
        if locked.state not in TERMINAL:
            raise Conflict(f"job {job.pk} has not ended: cancel it first, or erase it once "
                           "it ends", code="job_not_finished")
        if locked.erased_at is None:
            _erase(locked)
            locked.refresh_from_db()
            notify_job_erased(locked)
            if audited:
                audit(job.organization, "job.erased", user=user, api_key=api_key, job=job.pk,
                      note=note)
    job.refresh_from_db()  # the caller's copy too, as it is now
    return job


@dataclass(frozen=True)
class ErasedLabelled:
    erased: list[int]  # erased now (or before, by a request racing this one)
    left: int  # ended jobs that match and are not erased yet: ask again
    not_ended: int  # jobs that match and have not ended: cancel them, or wait


def jobs_erase_labelled(*, organization: Organization, labels: list[str], user=None,
                        api_key: ApiKey | None = None) -> ErasedLabelled:
    """Erase the organization's ended jobs that carry each of `labels` (as `GET
    /api/v1/jobs?label=` finds them), ERASE_BATCH at most, oldest first, each in its own
    transaction as one erase would: all a user's jobs, by the label their client gave them."""
    if not labels:
        raise ValidationFailed("name at least one label: a bulk erase never takes every job",
                               code="invalid_labels", field="label")
    matching = with_labels(Job.objects.filter(organization=organization), labels)
    due = matching.filter(state__in=sorted(TERMINAL), erased_at__isnull=True)
    done = [job_erase(job=job, user=user, api_key=api_key).pk
            for job in due.order_by("pk")[:ERASE_BATCH]]
    return ErasedLabelled(done, left=due.count(),
                          not_ended=matching.exclude(state__in=sorted(TERMINAL)).count())


def _erase(job: Job) -> None:
    now = timezone.now()
    files, logs = _stored_names(job)
    Job.objects.filter(pk=job.pk).update(
        prompt="", params={}, output="", result={"erased_at": now.isoformat()}, error="",
        request_fingerprint="", erased_at=now)
    # a late publish of a log (a gang's last rank, a lost node back) finds it expired and
    # deletes what it wrote (workers/agent/logs.py)
    Attempt.objects.filter(job=job).update(
        stderr_tail="", log_kept=False, log_expired_at=Coalesce("log_expired_at", Value(now)))
    StoredCheckpoint.objects.filter(job=job).delete()
    transaction.on_commit(lambda: _delete(files, logs))


def _stored_names(job: Job) -> tuple[list[str], list[str]]:
    """Every file of the job in the service's storage: its output and its checkpoints'
    copies; its tries' logs (each rank's, both streams)."""
    from workers.services.logs import STREAMS, log_name  # the workers app imports this one

    attempts = list(Attempt.objects.filter(job=job).values_list("pk", flat=True))
    ranks = AttemptRank.objects.filter(attempt_id__in=attempts).values_list("attempt_id", "rank")
    logs = [log_name(job.pk, attempt, rank, stream)
            for attempt, rank in [*((a, 0) for a in attempts), *ranks] for stream in STREAMS]
    copies = StoredCheckpoint.objects.filter(job=job).filter(~Q(name="")).values_list(
        "name", flat=True)
    return [*filter(None, [job.output.name]), *copies], logs


def _delete(files: list[str], logs: list[str]) -> None:
    from workers.services.logs import logs_delete

    for name in files:
        try:
            default_storage.delete(name)  # one already gone is no error
        except OSError:
            log.exception("deleting %s of an erased job", name)
    logs_delete(logs)
