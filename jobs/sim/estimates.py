"""What the simulator notes of the starts a waiting job was shown, for the report's
`start_after_estimate` and `start_after_work_ahead` figures (metrics.py)."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from jobs.policy.line import start_order, with_work_ahead
from jobs.policy.types import Decisions, Snapshot

from .model import SimJob


def note_reservations(queued: Mapping[int, SimJob], dec: Decisions) -> None:
    """The first start a reservation promised each job (what its pending reason shows)."""
    for r in dec.reservations:
        job = queued.get(r.job_id)
        if job is not None and job.first_start is None and job.first_estimate is None:
            job.first_estimate = r.start_at


def note_line(queued: Mapping[int, SimJob], snap: Snapshot, placed: AbstractSet[int],
              now: float) -> None:
    """The fleet work ahead of each job in the first line that showed it, drawn as the
    service's tick draws it (jobs/scheduler/positions.py)."""
    fleet = snap.fleet_gpus()
    if not fleet:
        return
    for q, ahead in with_work_ahead(start_order(snap), placed):
        job = queued.get(q.job_id)
        if job is not None and job.first_start is None and job.first_line is None:
            job.first_line = (now, ahead / fleet)
