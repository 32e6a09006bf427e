"""One scheduling round."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from jobs import policy as P
from jobs.metrics import publish_tick
from jobs.policy_build import running_compiled
from jobs.scheduler.apply import ApplyReport, apply_decisions
from jobs.scheduler.backlog import publish_backlog
from jobs.scheduler.holds import kept_holds, remember_holds
from jobs.scheduler.lock import tick_lock
from jobs.scheduler.nominations import NomineeReport, start_nominees
from jobs.scheduler.positions import positions_due, publish_positions
from jobs.scheduler.queue_cache import held_reasons, queue_rows_read
from jobs.scheduler.snapshot import load_snapshot
from jobs.scheduler.usage import fold_ended_attempts
from jobs.services.start_deadlines import cancel_late_starts

log = logging.getLogger(__name__)


@dataclass
class TickReport:
    ran: bool
    queued: int = 0
    decision_ms: float = 0.0
    applied: ApplyReport = field(default_factory=ApplyReport)
    nominees: NomineeReport = field(default_factory=NomineeReport)


CAPACITY_KEY = "gpusched:capacity-advice"


def publish_capacity_advice(advice: dict[str, int], at: float) -> None:
    """GPUs per type the fleet lacks to meet every tier's start SLO: an autoscaler's signal."""
    cache.set(CAPACITY_KEY, {"at": at, "short_gpus": advice}, timeout=300)


def capacity_advice() -> dict:
    return cache.get(CAPACITY_KEY) or {"at": None, "short_gpus": {}}


def _since(clock: float) -> float:
    return (time.perf_counter() - clock) * 1000


def policy_function():
    policies = getattr(P, "POLICIES", {"gpusched": P.decide, "fifo": P.fifo_decide})
    return policies.get(settings.GPUSCHED_POLICY, P.decide)


def scheduler_tick_run() -> TickReport:
    """Decide and commit once, unless another process is already doing so."""
    with tick_lock() as held:
        if not held:
            return TickReport(ran=False)
        from workers.services.dedication import dedications_due
        from workers.services.fleet import maintenance_due
        from workers.services.reaper import reap_expired_attempts, release_due_retries

        now = timezone.now()
        reap_expired_attempts(now=now)
        maintenance_due(now)
        dedications_due(now)
        release_due_retries(now=now)
        cancel_late_starts(now=now)
        nominees = start_nominees(now)
        fold_ended_attempts(now, settings.GPUSCHED_USAGE_HALF_LIFE_S)
        clock = time.perf_counter()
        snapshot = load_snapshot(now)
        snapshot.holds = kept_holds(snapshot.queued)
        phases_ms, clock = {"snapshot": _since(clock)}, time.perf_counter()
        decisions = policy_function()(snapshot)
        phases_ms["decision"], clock = _since(clock), time.perf_counter()
        applied = apply_decisions(decisions, now, held=held_reasons())
        phases_ms["commit"] = _since(clock)
        remember_holds(decisions)
        publish_capacity_advice(decisions.capacity_advice, now.timestamp())
        placed = {p.job_id for p in decisions.placements}
        publish_backlog(snapshot, placed)
        publish_tick(now.timestamp(), phases_ms, running_compiled(), queue_rows_read())
    # outside the lock: a round asked for meanwhile need not wait for the line
    if settings.GPUSCHED_POLICY == "gpusched" and positions_due(snapshot.now, snapshot.queued):
        publish_positions(snapshot, placed)
    decision_ms = phases_ms["decision"]
    if applied.placed or applied.preempted or nominees.started:
        log.info("tick: %d queued, placed %d (+%d nominees), preempted %d, refused %d "
                 "in %.1f ms", len(snapshot.queued), applied.placed, nominees.started,
                 applied.preempted, applied.refused, decision_ms)
    return TickReport(ran=True, queued=len(snapshot.queued), decision_ms=decision_ms,
                      applied=applied, nominees=nominees)
