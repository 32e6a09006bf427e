"""Reservations carried from one tick to the next.

The policy keeps the previous round's reservations before it walks the queue (see
jobs/policy/gpusched.py), so the nodes a gang drains stay its own across ticks. They live in
the cache: losing them costs one round of re-planning, never a wrong placement, because the
policy re-checks every kept node against the snapshot.
"""

from __future__ import annotations

from django.core.cache import cache

from jobs import policy as P

HOLDS_KEY = "gpusched:holds"
HOLDS_TTL_S = 300


def kept_holds(queued: list[P.QueuedJob]) -> dict[int, dict[str, int]]:
    """The last tick's reservations of jobs that are still queued."""
    raw = cache.get(HOLDS_KEY) or {}
    if not raw:
        return {}
    waiting = {j.job_id for j in queued}
    return {int(job): dict(plan) for job, plan in raw.items() if int(job) in waiting}


def remember_holds(decisions: P.Decisions) -> None:
    cache.set(HOLDS_KEY, decisions.next_holds(), timeout=HOLDS_TTL_S)
