"""An organization's own retention of its jobs' content: a service promising its users that
their prompts and videos are gone a day after they were made sets 24 hours, and each ended
job is erased that long after its end (services/erasure.py), without a request per job.
Set by its owners on the dashboard's team page, by a key of scope `full`, or by an
operator in admin; unset, content is kept as the service keeps outputs and logs."""

from __future__ import annotations

from datetime import datetime, timedelta

from jobs.models import ApiKey, Job, Organization
from jobs.models.tenancy import MAX_ERASE_AFTER_HOURS
from jobs.services.audit import audit
from jobs.services.erasure import job_erase
from jobs.services.errors import ValidationFailed
from jobs.states import TERMINAL

SWEEP_BATCH = 2_000  # jobs one sweep erases at most, every 5 minutes: the next goes on


def retention_set(org: Organization, hours: int | None, *, user=None,
                  api_key: ApiKey | None = None) -> None:
    """Set `org`'s retention (None: none), audited; inside the caller's transaction, with
    the organization's row locked."""
    if hours is not None and not 1 <= hours <= MAX_ERASE_AFTER_HOURS:
        raise ValidationFailed(f"a retention is 1 to {MAX_ERASE_AFTER_HOURS} hours (null: "
                               "none)", code="retention_out_of_range",
                               field="erase_after_hours")
    if hours == org.erase_after_hours:
        return
    audit(org, "retention.set", user=user, api_key=api_key, erase_after_hours=hours,
          was=org.erase_after_hours)
    org.erase_after_hours = hours
    org.save(update_fields=["erase_after_hours"])


def jobs_erase_due(*, now: datetime) -> int:
    """Erase the ended jobs of each organization with a retention that ended more than it
    ago, oldest first, SWEEP_BATCH at most; returns how many. Each organization gets an
    even share of the batch, and what some leave goes to the rest: one with a backlog of
    millions never holds up the others' promises. One audit event an organization a sweep
    says how many went, rather than one a job."""
    pending = list(Organization.objects.filter(erase_after_hours__isnull=False).order_by(
        "pk"))
    erased: dict[Organization, int] = {}
    left = SWEEP_BATCH
    while left > 0 and pending:
        share, more = max(left // len(pending), 1), []
        for org in pending[:left]:
            count = _erase_due(org, now, share)
            erased[org] = erased.get(org, 0) + count
            left -= count
            if count == share:  # it may have more
                more.append(org)
        pending = more
    for org, count in erased.items():
        if count:
            audit(org, "jobs.erased", erased=count, erase_after_hours=org.erase_after_hours,
                  ended_before=(now - timedelta(hours=org.erase_after_hours)).isoformat())
    return SWEEP_BATCH - left


def _erase_due(org: Organization, now: datetime, most: int) -> int:
    before = now - timedelta(hours=org.erase_after_hours)
    due = Job.objects.filter(organization=org, erased_at__isnull=True, finished_at__lt=before,
                             state__in=sorted(TERMINAL)).order_by("finished_at")
    erased = 0
    for job in due[:most]:
        job_erase(job=job, audited=False)
        erased += 1
    return erased
