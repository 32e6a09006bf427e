"""An operator's refund of an ended job, as support makes good a video that came out wrong:
what the job spent (or a part of it) goes back to the wallets it came from, one REFUND
transfer a hold, tied to the job, so its credits, the usage reports and the ledger all say
it was refunded, and the webhooks subscribed to credits.refunded are told. Jobs that end
FAILED or DEAD are refunded on their own (services/holds.py); this is for the rest.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from credits.models import Hold, Transfer
from credits.services.alerts import watch_low_credits
from credits.services.ledger import USAGE, lock_wallets, record, system_account
from jobs.models import Job
from jobs.services.audit import audit
from jobs.services.errors import Conflict, ValidationFailed
from jobs.services.webhooks import notify_organization
from jobs.states import TERMINAL


def job_refund(*, job: Job, by, note: str = "", amount: int | None = None) -> int:
    """Refund what `job` spent and was not refunded yet, or `amount` of it at most, for `by`
    (an operator, a user); the credits refunded: 0 for a job refunded in full already, so a
    refund repeated never passes what it spent. The holds drawn last give back first (the
    paid wallet before the promotional ones spent first). A job that has not ended is
    refused (`job_not_finished`): its holds still post."""
    if job.state not in TERMINAL:
        raise Conflict(f"job {job.pk} has not ended: cancel it first, or refund it once it "
                       f"ends", code="job_not_finished")
    if amount is not None and amount <= 0:
        raise ValidationFailed("amount must be a positive number of credits",
                               code="amount_not_positive", field="amount")
    memo = f"job {job.pk} refunded by {by}" + (f": {note}" if note else "")
    with transaction.atomic():
        # the holds, then their wallets lowest id first, then system:usage: the ledger's order
        holds = list(Hold.objects.select_for_update(no_key=True).filter(job=job).order_by("pk"))
        wallets = lock_wallets(hold.account_id for hold in holds)
        usage, refunded = system_account(USAGE), 0
        left = sum(h.posted - h.refunded for h in holds) if amount is None else amount
        for hold in reversed(holds):
            back = min(left - refunded, hold.posted - hold.refunded)
            if back <= 0:
                continue
            record(Transfer.Kind.REFUND, usage, wallets[hold.account_id], back, hold=hold,
                   job_id=job.pk, memo=memo)
            Hold.objects.filter(pk=hold.pk).update(refunded=F("refunded") + back)
            refunded += back
        if refunded:
            audit(job.organization, "job.refunded", user=by, job=job.pk, credits=refunded,
                  note=note)
            notify_organization(job.organization_id, "credits.refunded", {
                "organization": job.organization.slug, "job": job.pk,
                "credits": {"refunded": refunded}, "note": note})
            watch_low_credits(job.organization_id)
    return refunded
