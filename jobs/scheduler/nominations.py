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
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from jobs import policy as P
from jobs.models import GpuBinding, Job
from jobs.scheduler.apply import place, publish
from jobs.scheduler.snapshot import schedulable
from jobs.states import JobState
from jobs.transitions import TransitionError
from workers.models import Gpu, Node

log = logging.getLogger(__name__)


@dataclass
class NomineeReport:
    started: int = 0
    dropped: int = 0


def nomination(job: Job) -> tuple[P.Allocation, ...]:
    """The GPUs promised to `job`, one allocation per node (a gang may span nodes)."""
    first = P.Allocation(job.nominated_node.name, tuple(job.nominated_gpus))
    return (first, *(P.Allocation(p["node"], tuple(p["gpus"])) for p in job.nominated_peers))


def start_nominees(now: datetime) -> NomineeReport:
    """Bind every nominee whose promised GPUs are all free; drop promises that cannot hold."""
    report = NomineeReport()
    nominees = list(Job.objects.filter(state=JobState.QUEUED, nominated_node__isnull=False
                                       ).select_related("nominated_node"))
    for job, verdict in zip(nominees, _verdicts(nominees, now), strict=True):
        if verdict == "wait":
            continue
        if verdict == "start" and _start(job, now):
            report.started += 1
        else:  # the promise cannot be kept, or binding its GPUs was refused
            _drop(job)
            report.dropped += 1
    return report


def _verdicts(jobs: list[Job], now: datetime) -> list[str]:
    """Per job, 'start' when every promised GPU is free, 'wait' while its victims hold some,
    else 'drop'. Three queries for all of them: preemptors pile up while victims checkpoint."""
    promised = {job.pk: nomination(job) for job in jobs}
    names = {alloc.node for allocs in promised.values() for alloc in allocs}
    nodes = {node.name: node for node in Node.objects.filter(name__in=names)}
    healthy = {(node, index): gpu for gpu, node, index in Gpu.objects.filter(
        node__name__in=names, health=Gpu.Health.HEALTHY,
    ).values_list("pk", "node__name", "index")}
    holders: dict[int, set[int | None]] = defaultdict(set)  # GPU -> whom its holders stop for
    for gpu, preempted_for in GpuBinding.objects.filter(
        gpu_id__in=healthy.values(), released_at__isnull=True,
    ).values_list("gpu_id", "attempt__preempted_for_id"):
        holders[gpu].add(preempted_for)
    return [_verdict(job, promised[job.pk], now, nodes, healthy, holders) for job in jobs]


def _verdict(job: Job, allocs: tuple[P.Allocation, ...], now: datetime,
             nodes: dict[str, Node], healthy: dict[tuple[str, int], int],
             holders: dict[int, set[int | None]]) -> str:
    if any(a.node not in nodes or not schedulable(nodes[a.node], now) for a in allocs):
        return "drop"
    keys = {(a.node, index) for a in allocs for index in a.gpus}
    gpus = [healthy.get(key) for key in keys]
    if len(keys) != job.gpus or None in gpus:
        return "drop"
    held_for = set().union(*(holders.get(gpu, ()) for gpu in gpus))
    if not held_for:
        return "start"
    return "wait" if held_for == {job.pk} else "drop"


def _start(job: Job, now: datetime) -> bool:
    placement = P.Placement(job.pk, nomination(job))
    try:
        with transaction.atomic():
            attempt = place(placement, now)
            transaction.on_commit(lambda: publish(attempt, placement), robust=True)
    except (TransitionError, IntegrityError, ValueError) as exc:
        log.warning("nominee job %s not started: %s", job.pk, exc)
        return False
    return True


def _drop(job: Job) -> None:
    Job.objects.filter(pk=job.pk, state=JobState.QUEUED).update(
        nominated_node=None, nominated_gpus=[], nominated_peers=[])
