"""How long the waiting work would keep the whole fleet busy, per tier: what admission sheds
new jobs by (jobs/services/admission.py). Each tick publishes it from its snapshot."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Set as AbstractSet

from django.core.cache import cache

from jobs.policy.types import Snapshot

BACKLOG_KEY = "gpusched:backlog"
# a backlog older than this is not acted on: with the ticks stopped nothing is shed
BACKLOG_TTL_S = 300


def backlog_by_tier(snapshot: Snapshot, started: AbstractSet[int] = frozenset()
                    ) -> dict[str, float] | None:
    """Per tier, the GPU-seconds waiting at its priority or above (what runs before a new job
    of it) over the fleet's schedulable GPUs; a job counts its estimate, else its time limit,
    and the jobs the round `started` do not count. None while no GPU is schedulable: then
    every job waits, and its reason says why."""
    fleet = snapshot.fleet_gpus()
    if not fleet:
        return None
    work: dict[str, float] = defaultdict(float)
    for job in snapshot.queued:
        if job.job_id in started:
            continue
        work[job.tier] += job.gpus * (job.expected_duration_s or job.time_limit_s)
    tiers = snapshot.tiers
    return {name: sum(w for t, w in work.items()
                      if t in tiers and tiers[t].priority >= spec.priority) / fleet
            for name, spec in tiers.items()}


def publish_backlog(snapshot: Snapshot, started: AbstractSet[int]) -> None:
    seconds = backlog_by_tier(snapshot, started)
    if seconds is None:
        cache.delete(BACKLOG_KEY)
    else:
        cache.set(BACKLOG_KEY, {"at": snapshot.now, "seconds": seconds}, timeout=BACKLOG_TTL_S)


def backlog_seconds(tier: str) -> float | None:
    """The last tick's backlog ahead of a new job of `tier`, or None if none is known."""
    published = cache.get(BACKLOG_KEY)
    return None if published is None else published["seconds"].get(tier)
