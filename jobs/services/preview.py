"""A submission tried and undone: what the same request would do now (admitted or refused
as it would be, the credits it would hold), with nothing kept. It runs the submission itself
inside a transaction it rolls back, so the answer cannot drift from the real one."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from credits.services.holds import job_credits
from credits.services.statements import organization_balance
from jobs.metrics import refusals_uncounted
from jobs.models import Organization
from jobs.scheduler.backlog import backlog_seconds
from jobs.services.submission import JobSpec, job_submit


@dataclass(frozen=True)
class Preview:
    state: str  # QUEUED, or HELD behind the jobs it runs after
    hold: int  # credits it would hold while it waits and runs
    available_after: int  # the organization's credits left available once it holds them
    backlog_s: float | None  # its tier's backlog as of the last round (admission's figure)


class _Undone(Exception):
    """Carries the preview out of the transaction that its raising rolls back."""

    def __init__(self, preview: Preview) -> None:
        super().__init__()
        self.preview = preview


def job_submit_preview(*, organization: Organization, spec: JobSpec, user=None) -> Preview:
    """What submitting `spec` would do now, or the ServiceError it would raise; nothing is
    stored, no webhook or round is triggered, and a refusal is not counted as one."""
    try:
        with refusals_uncounted(), transaction.atomic():
            job = job_submit(organization=organization, spec=spec, user=user)
            raise _Undone(Preview(
                state=job.state, hold=job_credits(job)["held"],
                available_after=organization_balance(organization)["available"],
                backlog_s=backlog_seconds(organization.tier.name)))
    except _Undone as undone:
        return undone.preview
