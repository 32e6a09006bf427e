"""Copies of outputs that no job names, cleared from storage.

A report copies the output into the job's folder (`outputs/job-<id>/`) and then commits. Cut
off in between (a failover, a killed node), it leaves the copy behind: its node sends the
report again and copies again under another name, or the try is lost and another runs. So
each job's end clears its folder of what the job does not name, once the end commits.
Nothing writes there after: an ended job never runs again (a redrive is a new job), and a
report copies only once it ended its live try, which an ended job has no more of.
`manage.py outputs_sweep` does the same over every folder, for ends whose process died
before it cleared, and for copies left before ends cleared them.
"""

from __future__ import annotations

import re

from django.core.files.storage import default_storage
from django.db import transaction

from jobs.models import Job
from jobs.services.outputs import FOLDER, output_delete, output_folder
from jobs.states import TERMINAL

SWEEP_BATCH = 1_000  # folders whose jobs one query reads
_JOB_FOLDER = re.compile(r"job-(\d+)")


def strays_delete_once_ended(job: Job) -> None:
    """Inside the transaction that ends `job`: once it commits, delete the files in the
    job's folder that it does not name."""
    if job.started_at is not None:  # one that never started copied nothing
        transaction.on_commit(lambda: _delete_all(_strays(job.pk, _named(job.pk))))


def outputs_sweep(*, delete: bool = True) -> list[str]:
    """The files in the outputs' folders of jobs that ended or are gone that no job names;
    deleted unless `delete` is false. A live job's folder is left: its try may be copying."""
    try:
        folders = default_storage.listdir(FOLDER)[0]
    except FileNotFoundError:  # nothing was ever stored
        return []
    ids = sorted(int(m[1]) for f in folders if (m := _JOB_FOLDER.fullmatch(f)))
    found: list[str] = []
    for at in range(0, len(ids), SWEEP_BATCH):
        chunk = ids[at:at + SWEEP_BATCH]
        jobs = {pk: (state, output) for pk, state, output in Job.objects.filter(
            pk__in=chunk).values_list("pk", "state", "output")}
        for pk in chunk:
            state, output = jobs.get(pk, (None, ""))  # a job deleted names nothing
            if state is None or state in TERMINAL:
                found += _strays(pk, output)
    if delete:
        _delete_all(found)
    return found


def _named(job_id: int) -> str:
    return Job.objects.filter(pk=job_id).values_list("output", flat=True).first() or ""


def _strays(job_id: int, named: str) -> list[str]:
    folder = output_folder(job_id)
    try:
        files = default_storage.listdir(folder)[1]
    except FileNotFoundError:  # the job copied nothing
        return []
    return [f"{folder}/{name}" for name in sorted(files) if f"{folder}/{name}" != named]


def _delete_all(names: list[str]) -> None:
    for name in names:
        output_delete(name)
