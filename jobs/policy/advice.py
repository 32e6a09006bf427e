"""Capacity advice for the jobs the walk never reaches (docs/policy.md, "Pending reasons").

The walk counts each job it reaches against its start SLO itself; the tail of a long queue is
counted here: the GPUs of jobs already past their tier's start SLO, summed per (tier, org,
type preference) while the queue is grouped (queues.by_project), less the jobs the walk
reaches or a kept reservation starts, less capped orgs and tiers at the end.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from .types import QueuedJob

LateKey = tuple[str, str, tuple[str, ...]]  # (tier, org, type preference)


class LateTail:
    """GPUs of late jobs not yet answered otherwise, by (tier, org, type preference)."""

    def __init__(self, late_before: dict[str, float], late: dict[LateKey, int]) -> None:
        self.late_before = late_before  # tier -> jobs enqueued at or before this are late
        self.gpus = late
        self._early: set[int] = set()  # jobs started before the walk reached them

    def reached(self, job: QueuedJob) -> None:
        """The walk considers the job: it is counted with its own estimate, if at all."""
        if job.enqueued_at <= self.late_before[job.tier] and job.job_id not in self._early:
            self.gpus[job.tier, job.org, job.gpu_types] -= job.gpus

    def started_early(self, job: QueuedJob) -> None:
        """A kept reservation starts the job before the walk reaches it: it needs no GPUs."""
        if job.job_id not in self._early:
            self.reached(job)
            self._early.add(job.job_id)

    def short_by_type(self, capped: Callable[[str, str], bool]) -> dict[str, int]:
        """GPUs by first preferred type ("any" for none), less the (tier, org) at a cap."""
        short: dict[str, int] = defaultdict(int)
        for (tier, org, types), gpus in self.gpus.items():
            if gpus and not capped(tier, org):
                short[types[0] if types else "any"] += gpus
        return short
