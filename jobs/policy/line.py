"""Queue positions: the line the ranking serves, as people read it ("12th of 1,240").

Under fair share a job's place is not its arrival: an organization that used less goes
ahead of one that used more, and each start moves its owner back. The line is the ranked
walk (ranking.py) with every job charged to its tier, org, project and user as it is passed,
as a round charges a job it starts: the order the queue would start in if GPUs of every kind
came free one job at a time. Fits, caps, reservations and preemption are left aside, so a
job's place says who is ahead of it, and its pending reason why it still waits.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet

from .gcpause import gc_paused
from .queues import tier_floors
from .ranking import RankedQueue
from .shares import Shares
from .types import QueuedJob, Snapshot


def start_order(snap: Snapshot) -> list[QueuedJob]:
    """The queued jobs, first in line first; jobs of tiers the snapshot does not define come
    last, in queue order."""
    fleet = snap.fleet_gpus()
    shares = Shares.of(snap.running)
    with gc_paused():
        queue = RankedQueue(snap, shares, tier_floors(snap.tiers, fleet))
        order: list[QueuedJob] = []
        job = queue.pop()
        while job is not None:
            order.append(job)
            shares.add(job, job.gpus)
            queue.charged(job)
            job = queue.pop()
        order.extend(queue.unknown)
    return order


def with_work_ahead(line: Iterable[QueuedJob], skip: AbstractSet[int] = frozenset()
                    ) -> Iterator[tuple[QueuedJob, float]]:
    """Each job of the line but those in `skip`, with the GPU-seconds of the jobs ahead of it
    (their `expected_duration_s`, else their time limits: what the fleet's backlog is
    measured in)."""
    ahead = 0.0
    for job in line:
        if job.job_id not in skip:
            yield job, ahead
            ahead += job.gpus * (job.expected_duration_s or job.time_limit_s)
