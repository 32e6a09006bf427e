"""Virtual deadlines: the order of a user's jobs inside a project (`PolicyConfig.limit_weight`)."""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from operator import add, attrgetter, mul

from .types import QueuedJob

_ENQ = attrgetter("enqueued_at")
_LIMIT = attrgetter("time_limit_s")


def virtual_deadlines(queue: list[QueuedJob], limit_weight: float) -> list[float]:
    """Each job's place inside its project: enqueued_at + limit_weight x time limit.

    Among jobs of one age the shortest goes first, which shortens the mean wait; a job is
    never overtaken by one submitted after its own virtual deadline, which bounds its wait.
    The time limit, not the estimate, is the size: the service enforces it. (C-level maps:
    this runs over the whole queue every round.)
    """
    return deadline_keys(map(_ENQ, queue), map(_LIMIT, queue), limit_weight)


def deadline_keys(enqueued: Iterable[float], limits: Iterable[float],
                  limit_weight: float) -> list[float]:
    """enqueued_at + limit_weight x time limit, pairwise: the loader sorts rows by the same
    keys before it builds jobs, so its order is this module's to the last bit."""
    return list(map(add, enqueued, map(partial(mul, limit_weight), limits)))


def in_deadline_order(queue: list[QueuedJob], limit_weight: float) -> list[QueuedJob]:
    """The queue by virtual deadline; jobs with equal deadlines keep their order."""
    return by_keys(queue, virtual_deadlines(queue, limit_weight))


def by_keys(queue: list[QueuedJob], keys: list[float]) -> list[QueuedJob]:
    return [queue[i] for i in sorted(range(len(queue)), key=keys.__getitem__)]
