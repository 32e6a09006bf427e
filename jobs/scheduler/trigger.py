"""Ask for a scheduling round soon, without flooding the scheduler queue."""

from __future__ import annotations

import logging

from django.core.cache import cache

log = logging.getLogger(__name__)

_PENDING_KEY = "gpusched:tick-requested"


def request_tick() -> None:
    """Enqueue one tick; calls within the same second collapse into it (cache.add is atomic)."""
    from jobs.tasks import scheduler_tick

    try:
        if not cache.add(_PENDING_KEY, 1, timeout=1):
            return
        scheduler_tick.apply_async(expires=10)
    except Exception:  # the beat tick comes within a second anyway; never fail a request
        log.warning("could not request a scheduler tick", exc_info=True)
