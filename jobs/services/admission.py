"""Admission: refuse a new job with 429 and a Retry-After, rather than queue it, when its
organization has as many jobs waiting as its tier allows, or when the work already waiting at
its tier or above would keep the fleet busy past what the tier tolerates. Tiers tolerate
more the higher they are (jobs/defaults.py), so the lowest tier is shed first."""

from __future__ import annotations

import math
import time

from jobs.metrics import count_refusal
from jobs.models import Job, Organization
from jobs.scheduler.backlog import backlog_seconds
from jobs.services.errors import ServiceError
from jobs.states import JobState

# jobs that hold a place in the queue
WAITING = (JobState.HELD, JobState.QUEUED, JobState.RETRY_WAIT)
_UNKNOWN_WAIT_S = 60  # Retry-After when no waiting job of the organization has an estimate


class Refused(ServiceError):
    """Not now: the client should try again after `retry_after` seconds."""

    code = "refused"
    status = 429

    def __init__(self, message: str, *, code: str, retry_after: float):
        super().__init__(message, code=code)
        self.retry_after = max(1, math.ceil(retry_after))


def admit(org: Organization) -> None:
    """Raise Refused if a new job of `org` may not queue now. The caller holds `org`'s row
    lock, so that two submissions cannot both take the last place."""
    tier = org.tier
    limit = tier.max_queued_jobs_per_org
    if limit is not None:
        waiting = Job.objects.filter(organization=org, state__in=WAITING)
        if waiting.count() >= limit:
            _refuse(f"{limit} jobs of this organization are waiting, the most tier "
                    f"{tier.name} allows", "queue_full", _next_start_in(waiting), org)
    shed_after = tier.shed_after_backlog_s
    if shed_after is not None:
        backlog = backlog_seconds(tier.name)
        if backlog is not None and backlog > shed_after:
            _refuse(f"the work waiting at tier {tier.name} or above would keep the fleet busy "
                    f"for {backlog / 3600:.1f} h; the tier takes new jobs while that is under "
                    f"{shed_after / 3600:.1f} h", "overloaded", backlog - shed_after, org)


def _refuse(message: str, code: str, retry_after: float, org: Organization) -> None:
    # operators see refusals in /metrics, and each in the logs
    count_refusal(code, organization_id=org.pk, retry_after_s=round(retry_after))
    raise Refused(message, code=code, retry_after=retry_after)


def _next_start_in(waiting) -> float:
    """Seconds until the first of these jobs is estimated to start (its place frees up)."""
    soonest = waiting.exclude(estimated_start=None).order_by("estimated_start").values_list(
        "estimated_start", flat=True).first()
    return _UNKNOWN_WAIT_S if soonest is None else soonest.timestamp() - time.time()
