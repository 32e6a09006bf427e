"""Checkpoints that travel with their job, so a resume finds them on any node.

A node writes checkpoints under GPUSCHED_WORK_ROOT, its own disk unless the nodes share one.
An attempt that stops to resume (a preemption, a drain) copies each node's checkpoint
directory, as one tar, to Django's storage (where outputs go) before it reports, and a job
on one node copies while it runs too (workers/agent/checkpoint_copies.py); the report or the
heartbeat records the copy under the attempt's fencing token, so a fenced-off attempt
records nothing and its copy is deleted. Each node of the next attempt puts its rank's
copy in place before the binary starts, all of one earlier attempt's (resume_copies),
unless its directory holds that copy already: a marker file names the copy a directory was
written from or into, so a resume on the same node, or on nodes sharing the work root,
copies nothing. The copies of jobs that ended, and those older than what a resume reads, go
by a sweep (beat); each node sweeps its work root of the directories of jobs that ended,
which a node a job moved away from would keep otherwise. GPUSCHED_STORE_CHECKPOINTS=false
turns copying off, for a fleet whose work root is shared storage already.
"""

from __future__ import annotations

import logging
import re
import shutil
import tarfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Count

from jobs.models import Job, StoredCheckpoint
from jobs.states import TERMINAL
from workers.services.checkpoint_cuts import (
    copies_of,
    nodes_of,
    step_kept_at,
    superseded,
    whole_step,
)
from workers.services.checkpoint_tar import unpack_tar

log = logging.getLogger(__name__)
MARKER = ".gpusched-stored"  # in a checkpoint directory: the copy it matches
KEPT_STEPS = 3  # a gang node's copies made while it ran: its peers may have copied others
FOLDER = "checkpoints"  # in storage, flat: a sweep leaves no empty folder behind
_JOB_OF = re.compile(r"job-(\d+)-")
READ_RETRY_EVERY_S = 2.0
# a copy no read will bring back: gone (deleted, never stored), or not a tar that is whole
# and safe (a name reaching outside, a file cut short: tarfile's errors)
UNREADABLE = (FileNotFoundError, tarfile.TarError, EOFError)


class _Made(File):
    """A file already written on disk: file system storage moves it into place instead of
    copying it (other storages read it as any file)."""

    def temporary_file_path(self) -> str:
        return self.file.name


def packing_path(directory: Path) -> Path:
    """Where a directory's tar is packed before it goes into storage: beside it, on the
    checkpoint's own disk."""
    return directory.with_name(f".{directory.name}.tar")


def checkpoint_pack(job_id: int, attempt_id: int, rank: int, directory: Path) -> str:
    """Copy a node's checkpoint directory to storage; the copy's name, or "" when copying is
    off or the directory holds nothing."""
    files = [p for p in directory.iterdir() if p.name != MARKER] if directory.is_dir() else []
    if not settings.GPUSCHED_STORE_CHECKPOINTS or not files:
        return ""
    tar_path = packing_path(directory)
    try:
        with tarfile.open(tar_path, "w") as tar:
            for path in sorted(files):
                tar.add(path, arcname=path.name)
        with tar_path.open("rb") as fh:
            name = default_storage.save(
                f"{FOLDER}/job-{job_id}-attempt-{attempt_id}-rank-{rank}.tar", _Made(fh))
    finally:
        tar_path.unlink(missing_ok=True)
    (directory / MARKER).write_text(name)
    return name


def checkpoint_unpack(name: str, directory: Path) -> bool:
    """Put the stored copy `name` in the directory, unless it matches it already; True if
    it was copied. A copy that is gone or broken leaves the directory empty: the binary
    starts from the beginning rather than from another attempt's checkpoint. Storage that
    does not answer is read again every few seconds for GPUSCHED_CHECKPOINT_READ_RETRY_S
    first: starting afresh throws away the work the copy kept, which its job paid for."""
    marker = directory / MARKER
    if not name or not settings.GPUSCHED_STORE_CHECKPOINTS or (
            marker.is_file() and marker.read_text() == name):
        return False
    deadline = time.monotonic() + settings.GPUSCHED_CHECKPOINT_READ_RETRY_S
    while (error := _read(name, directory)) is not None and not isinstance(
            error, UNREADABLE) and time.monotonic() < deadline:
        log.warning("stored checkpoint %s could not be read (%r); reading it again", name,
                    error)
        time.sleep(READ_RETRY_EVERY_S)
    if error is not None:
        log.error("stored checkpoint %s could not be read; starting without it", name,
                  exc_info=error)
        empty_directory(directory)
        return False
    marker.write_text(name)
    return True


def _read(name: str, directory: Path) -> Exception | None:
    """Unpack the copy into the emptied directory; what stopped it, if anything."""
    empty_directory(directory)
    try:
        unpack_tar(name, directory)  # names inside stay inside
    except Exception as exc:  # any storage backend's error
        return exc
    return None


def empty_directory(directory: Path) -> None:
    """The checkpoint directory, there and empty: the binary starts from the beginning."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)


def checkpoint_record(*, job_id: int, attempt_id: int, rank: int, name: str,
                      step: int | None = None, taken_at: datetime | None = None) -> None:
    """Record a node's copy; called under the attempt's token by its report (a copy made at
    the stop) or, for a copy made while it runs, its heartbeat (`taken_at`, when its files
    were taken); `step`, the one the binary announced with it, if any. A job on one node
    keeps its latest copy; a gang's node keeps its copy made at the stop and those of the
    last KEPT_STEPS steps it copied (checkpoint_cuts.py). What a copy replaces goes once
    this commits."""
    if not name:
        return
    mine = StoredCheckpoint.objects.filter(attempt_id=attempt_id, rank=rank)
    if mine.filter(name=name).exists():  # sent again, its first answer lost: kept once
        return
    if _on_one_node(attempt_id, rank):
        replaced = mine
    elif taken_at is None:
        replaced = mine.filter(taken_at__isnull=True)
    else:
        ran = mine.filter(taken_at__isnull=False)
        kept = ran.exclude(step=step).order_by("-step").values_list("pk", flat=True)
        # and the step every node copied, until another is: the gang's resume
        replaced = ran.exclude(pk__in=list(kept[:KEPT_STEPS - 1])).exclude(
            step=whole_step(attempt_id))
    earlier = [n for n in replaced.values_list("name", flat=True) if n != name]
    replaced.delete()
    StoredCheckpoint.objects.create(job_id=job_id, attempt_id=attempt_id, rank=rank,
                                    name=name, step=step, taken_at=taken_at)
    transaction.on_commit(lambda: [checkpoint_discard(n) for n in earlier])


@dataclass(frozen=True)
class Taken:
    """A copy made while the binary ran (workers/agent/checkpoint_copies.py): its storage
    name, when its files were taken, and the step the binary announced with them."""

    name: str
    at: datetime
    step: int | None = None


def copy_record(*, job_id: int, attempt_id: int, rank: int, copy: Taken) -> datetime | None:
    """Record a copy made while the attempt runs, under its token and with its attempt row
    locked (so that a gang's nodes record one at a time); the moment up to which the run's
    work is now kept: the copy's own for a job on one node, and for a gang, once every node
    copied the step, the earliest of their moments (None until then)."""
    checkpoint_record(job_id=job_id, attempt_id=attempt_id, rank=rank, name=copy.name,
                      step=copy.step, taken_at=copy.at)
    if _on_one_node(attempt_id, rank):
        return copy.at
    return step_kept_at(attempt_id, copy.step) if copy.step is not None else None


def _on_one_node(attempt_id: int, rank: int) -> bool:
    return rank == 0 and nodes_of(attempt_id) == 1


def checkpoint_discard(name: str) -> None:
    """Delete a copy no resume will read: one a fenced-off attempt could not record, one a
    later copy replaced, or one dropped at its attempt's end."""
    if name:
        default_storage.delete(name)


def checkpoints_sweep() -> int:
    """Delete the copies no resume will read: those of jobs that ended, those older than
    the job's latest cut (checkpoint_cuts.py), and those never recorded (a node that died
    between storing and reporting) once their job ended. Returns how many went."""
    rows = list(StoredCheckpoint.objects.filter(job__state__in=TERMINAL).values_list(
        "pk", "name"))
    for copies in copies_of(_holding_several()).values():
        rows += [(c.pk, c.name) for c in superseded(copies)]
    for _, name in rows:
        _delete(name)
    # its rows go even where storage kept the file: the next sweep finds it unrecorded
    StoredCheckpoint.objects.filter(pk__in=[pk for pk, _ in rows]).delete()
    return len(rows) + _sweep_unrecorded()


def _delete(name: str) -> bool:
    """Delete a copy; one storage will not delete (a permission, an object locked) is
    logged and left, so that it never stops the sweep of the rest run after run. A file
    already gone is no error."""
    try:
        default_storage.delete(name)
    except OSError:
        log.exception("deleting checkpoint copy %s", name)
        return False
    return True


def _holding_several() -> list[int]:
    """The live jobs holding more than one copy."""
    return list(StoredCheckpoint.objects.exclude(job__state__in=TERMINAL).values(
        "job_id").annotate(n=Count("pk")).filter(n__gt=1).values_list("job_id", flat=True))


def _sweep_unrecorded() -> int:
    """Files in the folder whose job ended or is gone (their rows, if any, went above)."""
    try:
        files = default_storage.listdir(FOLDER)[1]
    except FileNotFoundError:  # nothing was ever stored
        return 0
    jobs = {name: int(m.group(1)) for name in files if (m := _JOB_OF.match(name))}
    ended = _ended(set(jobs.values()))
    over = [name for name, job in jobs.items() if job in ended]
    return sum(_delete(f"{FOLDER}/{name}") for name in over)


def work_root_sweep(root: Path) -> int:
    """Remove the job directories (`job-<id>`, workers/agent/command.py) under a node's work
    root whose job ended or is gone: the checkpoints a job left on a node it no longer runs
    on, which nothing else removes. Returns how many went."""
    dirs = {int(p.name[4:]): p for p in root.glob("job-*") if p.name[4:].isdigit()}
    ended = _ended(set(dirs))
    over = [path for pk, path in dirs.items() if pk in ended]
    for path in over:
        shutil.rmtree(path, ignore_errors=True)
    return len(over)


def _ended(job_ids: set[int]) -> set[int]:
    """Those of the jobs that ended or are gone: none of them will run again."""
    live = Job.objects.filter(pk__in=job_ids).exclude(state__in=TERMINAL).values_list(
        "pk", flat=True)
    return job_ids - set(live)
