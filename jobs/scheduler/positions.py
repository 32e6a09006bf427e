"""Queue positions: each waiting job's place in line ("12th of 1,240") for the API and the
dashboard, as the policy's ranking would serve the queue (jobs/policy/line.py), and the work
ahead of it: how long the jobs ahead would keep the whole fleet busy.

The tick publishes the line from its own snapshot every GPUSCHED_POSITIONS_SECONDS, not
every round: the whole line is a pass of the ranking over the queue (about half a second
at 50,000 queued, interpreted), and a place read once a few seconds is as useful as one
read every second. A job submitted since the last line has no place at all, though, so a
new arrival brings the next line forward, once as long has passed as 20 times the last one
took to draw: within a fraction of a second on a small queue, a few seconds on a large one,
and never more than a twentieth of the scheduler's time. The line is cut into entries of
job ids by range, so reading one job's place, or a page's, costs one or two small cache
reads. Each publication writes a new generation and then points to it, so a reader sees one
line, never a mix of two.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache

from jobs.policy.line import start_order, with_work_ahead
from jobs.policy.types import QueuedJob, Snapshot

# the current generation: {gen, at, length, ms, fleet, newest}
POSITIONS_KEY = "gpusched:positions"
EARLY_COST_FACTOR = 20  # a new arrival's line comes this many drawing times after the last
_IDS_PER_ENTRY = 1024  # job ids of one cache entry: a page of recent jobs is one or two


@dataclass(frozen=True)
class QueuePosition:
    position: int  # 1: first in line
    length: int  # jobs in line
    at: float  # when the line was drawn (Unix time)
    # the jobs ahead's GPU-seconds (run times, else time limits) over the fleet's GPUs: how
    # long they would keep the whole fleet busy; None while no GPU is schedulable
    ahead_s: float | None

    def words(self) -> str:
        """For people: "12 of 1,240 in line, 40 min of fleet work ahead"."""
        text = f"{self.position:,} of {self.length:,} in line"
        if self.ahead_s:
            text += f", {_duration(self.ahead_s)} of fleet work ahead"
        return text


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _entry_key(gen: int, job_id: int) -> str:
    return f"{POSITIONS_KEY}:{gen}:{job_id // _IDS_PER_ENTRY}"


def _ttl() -> float:
    # a line outlives its successor's publication, and vanishes soon after the ticks stop
    return 3 * settings.GPUSCHED_POSITIONS_SECONDS + 30


def positions_due(now: float, queued: Sequence[QueuedJob] = ()) -> bool:
    """Whether the line published last is GPUSCHED_POSITIONS_SECONDS old (or absent), or
    `queued` holds a job that arrived after it was drawn and EARLY_COST_FACTOR times its
    drawing time has passed."""
    last = cache.get(POSITIONS_KEY)
    if last is None:
        return True
    age = now - last["at"]
    if age >= settings.GPUSCHED_POSITIONS_SECONDS:
        return True
    return (age >= EARLY_COST_FACTOR * last["ms"] / 1000
            and _newest(queued) > last.get("newest", 0))


def _newest(queued: Sequence[QueuedJob]) -> int:
    """The id of the queue's newest job (ids grow with submission)."""
    return max((job.job_id for job in queued), default=0)


def publish_positions(snapshot: Snapshot, started: AbstractSet[int]) -> int:
    """Draw the line of the snapshot's queue without the jobs the round `started`, publish
    it, and return its length."""
    clock = time.perf_counter()
    entries: dict[str, dict[int, tuple[int, float]]] = defaultdict(dict)
    gen = time.time_ns()
    place = 0
    for place, (job, ahead) in enumerate(with_work_ahead(start_order(snapshot), started), 1):
        entries[_entry_key(gen, job.job_id)][job.job_id] = (place, ahead)
    fleet = snapshot.fleet_gpus()
    ttl = _ttl()
    cache.set_many(entries, timeout=ttl)
    ms = (time.perf_counter() - clock) * 1000
    cache.set(POSITIONS_KEY, {"gen": gen, "at": snapshot.now, "length": place, "ms": ms,
                              "fleet": fleet, "newest": _newest(snapshot.queued)},
              timeout=ttl)
    return place


def queue_positions(job_ids: Iterable[int]) -> dict[int, QueuePosition]:
    """The published place of each of these jobs that was in line when it was drawn."""
    line = cache.get(POSITIONS_KEY)
    ids = set(job_ids)
    if line is None or not ids:
        return {}
    gen = line["gen"]
    entries = cache.get_many({_entry_key(gen, i) for i in ids})
    fleet = line["fleet"]
    found: dict[int, QueuePosition] = {}
    for job_id in ids:
        entry = entries.get(_entry_key(gen, job_id), {}).get(job_id)
        if entry is not None:
            place, ahead = entry
            found[job_id] = QueuePosition(place, line["length"], line["at"],
                                          ahead / fleet if fleet else None)
    return found


def places_of(jobs: Iterable[Any]) -> dict[int, QueuePosition]:
    """The places of those of these jobs (anything with `pk` and `state`) that wait, in one
    read: a page of jobs, or one."""
    return queue_positions(job.pk for job in jobs if job.state == "QUEUED")


def in_line(job_ids: Iterable[int]) -> list[tuple[int, QueuePosition]]:
    """These jobs' places, first in line first; jobs the published line lacks are left out."""
    return sorted(queue_positions(job_ids).items(), key=lambda item: item[1].position)


def last_publication() -> dict | None:
    """{at, length, ms} of the line published last, for /metrics."""
    return cache.get(POSITIONS_KEY)
