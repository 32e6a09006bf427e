"""GPUs promised to a preemptor: bound to it once its victims let go, to nothing else before.

The round that preempts hands the preemptor its victims' GPUs (a Placement with
`preempted=True`); apply.py stores that nomination on the job. From then on the snapshot shows
those GPUs as the preemptor's (snapshot.load_nominees) and leaves the job out of the queue, so
no later round places other work on them or preempts for the job twice. Each tick first binds
every nominee whose GPUs are all free. A nomination is dropped, and its job waits in the queue
again, when its node can no longer take work or another attempt holds one of its GPUs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from jobs import policy as P
from jobs.models import GpuBinding, Job
from jobs.scheduler.apply import place, publish
from jobs.scheduler.snapshot import schedulable
from jobs.states import JobState
from jobs.transitions import TransitionError
from workers.models import Gpu

log = logging.getLogger(__name__)


@dataclass
class NomineeReport:
    started: int = 0
    dropped: int = 0


def start_nominees(now: datetime) -> NomineeReport:
    """Bind every nominee whose promised GPUs are all free; drop promises that cannot hold."""
    report = NomineeReport()
    nominees = Job.objects.filter(state=JobState.QUEUED, nominated_node__isnull=False
                                  ).select_related("nominated_node")
    for job in nominees:
        verdict = _verdict(job, now)
        if verdict == "wait":
            continue
        if verdict == "start" and _start(job, now):
            report.started += 1
        else:  # the promise cannot be kept, or binding its GPUs was refused
            _drop(job)
            report.dropped += 1
    return report


def _verdict(job: Job, now: datetime) -> str:
    """'start' when every promised GPU is free, 'wait' while victims hold some, else 'drop'."""
    node = job.nominated_node
    if not schedulable(node, now) or len(job.nominated_gpus) != job.gpus:
        return "drop"
    gpus = Gpu.objects.filter(node=node, index__in=job.nominated_gpus,
                              health=Gpu.Health.HEALTHY)
    if gpus.count() != job.gpus:
        return "drop"
    holders = set(GpuBinding.objects.filter(gpu__in=gpus, released_at__isnull=True)
                  .values_list("attempt__preempted_for_id", flat=True))
    if not holders:
        return "start"
    return "wait" if holders == {job.pk} else "drop"


def _start(job: Job, now: datetime) -> bool:
    alloc = P.Allocation(job.nominated_node.name, tuple(job.nominated_gpus))
    try:
        with transaction.atomic():
            attempt = place(P.Placement(job.pk, (alloc,)), now)
            transaction.on_commit(lambda: publish(attempt.pk, attempt.token, alloc.node))
    except (TransitionError, IntegrityError, ValueError) as exc:
        log.warning("nominee job %s not started: %s", job.pk, exc)
        return False
    return True


def _drop(job: Job) -> None:
    Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
        nominated_node=None, nominated_gpus=[])
