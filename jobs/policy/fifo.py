"""First-fit FIFO: what one plain Celery queue does. A baseline, and the simplest policy.

Jobs start in arrival order on the first node (or, for jobs larger than a node, the first
island) with room; the first job that does not fit blocks every later one, as a queue
consumer cannot skip its head. A job no node or island could ever hold is skipped.
"""

from __future__ import annotations

from .baselines import Fleet, serve_fifo
from .types import Decisions, Snapshot


def decide(snapshot: Snapshot) -> Decisions:
    out = Decisions()
    serve_fifo(snapshot.queued, Fleet.of(snapshot), out, "arrival")
    return out
