"""What a job's binary printed, kept where its organization can read it.

Each try keeps the last GPUSCHED_LOG_MAX_BYTES of its stdout and of its stderr, per node of
a gang. The node worker publishes them while the binary runs and once at its end
(workers/agent/logs.py); the API and the dashboard read them here. A log goes
GPUSCHED_OUTPUT_RETENTION_DAYS after its try ended, as outputs do. Names are derived from
the ids, never shown to clients: a reader comes through its job's organization."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, default_storage
from django.db import transaction

from jobs.models import Attempt, AttemptRank, Job
from jobs.services.erasure import erased
from jobs.services.errors import NotFound, ServiceError, StorageUnavailable

log = logging.getLogger(__name__)
STREAMS = ("stdout", "stderr")
EXPIRE_BATCH = 500  # attempts whose logs one sweep deletes at most; the next goes on


def log_name(job_id: int, attempt_id: int, rank: int, stream: str) -> str:
    own = f"-rank-{rank}" if rank else ""
    return f"logs/job-{job_id}/attempt-{attempt_id}{own}/{stream}.log"


def log_store(name: str, data: bytes) -> None:
    """Replace the stored log `name` by `data`: a reader sees the old copy or the new, whole."""
    if isinstance(default_storage, FileSystemStorage):
        path = Path(default_storage.path(name))
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        part.write_bytes(data)
        os.replace(part, path)
        return
    default_storage.delete(name)  # else save would keep both, under another name
    default_storage.save(name, ContentFile(data))


def log_kept(attempt_id: int, *, first: bool = True) -> bool:
    """Mark the attempt as having a log in storage (`first`: not marked yet by this caller),
    for its readers and its expiry. False once its log was deleted (its job erased, or past
    its retention): what the caller stored is then for it to delete."""
    if first:
        Attempt.objects.filter(pk=attempt_id, log_kept=False,
                               log_expired_at__isnull=True).update(log_kept=True)
    return not Attempt.objects.filter(pk=attempt_id, log_expired_at__isnull=False).exists()


def log_read(name: str, tail: int | None = None) -> bytes | None:
    """The stored log, or its last `tail` bytes; None if nothing was published under it."""
    try:
        with default_storage.open(name, "rb") as fh:
            if tail is not None and fh.size > tail:
                fh.seek(fh.size - tail)
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("log %s could not be read", name, exc_info=True)
        raise StorageUnavailable("storage did not give the log; ask again shortly") from exc


class Gone(ServiceError):
    code = "log_expired"
    status = 410


@dataclass(frozen=True)
class LogText:
    data: bytes
    attempt_id: int
    final: bool  # its try has ended: nothing more will be published


def attempt_log(job: Job, *, attempt_id: int | None, rank: int = 0, stream: str = "stdout",
                tail: int | None = None) -> LogText:
    """What rank `rank` of the job's try `attempt_id` (its latest if None) printed to
    `stream`, its last `tail` bytes if given; refuses what does not exist or is gone."""
    if refusal := erased(job):
        raise refusal
    attempts = job.attempts.order_by("-pk")
    attempt = (attempts.filter(pk=attempt_id) if attempt_id else attempts).first()
    if attempt is None:
        raise NotFound(f"job {job.pk} has no attempt {attempt_id}" if attempt_id else
                       f"job {job.pk} has not started yet", code="not_found")
    if attempt.log_expired_at:
        raise Gone(f"the log was deleted at {attempt.log_expired_at.isoformat()}, past its "
                   "retention after the attempt ended")
    if rank and not attempt.ranks.filter(rank=rank).exists():
        raise NotFound(f"attempt {attempt.pk} ran on no rank {rank}", code="not_found",
                       field="rank")
    # nothing kept: it printed nothing, or nothing yet (its node publishes every
    # GPUSCHED_LOG_PUBLISH_S), or its node was lost first
    data = log_read(log_name(job.pk, attempt.pk, rank, stream), tail) if (
        attempt.log_kept) else None
    return LogText(data or b"", attempt.pk, final=attempt.ended_at is not None)


def expire_logs(*, now: datetime) -> int:
    """Delete the logs of tries that ended more than the retention ago; returns how many
    tries'. The attempt forgets its log before the files go, as a job its output."""
    days = settings.GPUSCHED_OUTPUT_RETENTION_DAYS
    if days <= 0:
        return 0
    old = Attempt.objects.filter(log_kept=True, ended_at__lt=now - timedelta(days=days))
    expired = 0
    for attempt_id, job_id in old.values_list("pk", "job_id")[:EXPIRE_BATCH]:
        with transaction.atomic():
            if not Attempt.objects.filter(pk=attempt_id, log_kept=True).update(
                    log_kept=False, log_expired_at=now):
                continue
            ranks = [0, *AttemptRank.objects.filter(attempt_id=attempt_id).values_list(
                "rank", flat=True)]
            names = [log_name(job_id, attempt_id, rank, stream)
                     for rank in ranks for stream in STREAMS]
            transaction.on_commit(lambda names=names: logs_delete(names))
        expired += 1
    return expired


def logs_delete(names: list[str]) -> None:
    """Delete the logs `names` of one try (or of one job's tries) and their folders left
    empty."""
    if not names:
        return
    for name in names:
        try:
            default_storage.delete(name)
        except OSError:
            log.exception("deleting log %s", name)
    if isinstance(default_storage, FileSystemStorage):  # the try's folders, the job's if empty
        folders = {Path(default_storage.path(name)).parent for name in names}
        for empty in [*folders, next(iter(folders)).parent]:
            with contextlib.suppress(OSError):
                empty.rmdir()
