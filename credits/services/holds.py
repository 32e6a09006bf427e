"""A job's credits: reserved at submission, posted as its GPU time is kept, settled at its end.

What a job pays: the GPU time of its attempts at the price of the GPUs they ran on, never more
than its hold (the dearest GPUs it accepts, for its whole time limit). Work lost to a
preemption or a lost node past the last checkpoint is not billed: a running attempt posts only
what it has checkpointed, and the rest at its end if it ends the job SUCCEEDED, TIMED_OUT or
CANCELLED. A job that ends FAILED or DEAD delivered nothing and is refunded in full.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import F, Q
from django.utils import timezone

from credits.errors import InsufficientCredits
from credits.models import Account, Hold, Transfer
from credits.services.alerts import watch_low_credits
from credits.services.budgets import check_budgets
from credits.services.ledger import USAGE, lock_wallets, record, system_account
from credits.services.pricing import cost, highest_price
from jobs.metrics import count_refusal
from jobs.models import Attempt, Job
from jobs.services.dependencies import lock_before_ledger
from jobs.states import JobState

REFUNDED_ENDS = frozenset({JobState.FAILED, JobState.DEAD})


def spendable_wallets(organization_id: int) -> list[Account]:
    """The organization's wallets that may pay now, locked, in the order they are spent:
    promotional before paid, the one expiring soonest first."""
    now = timezone.now()
    wallets = Account.objects.select_for_update(no_key=True).filter(
        Q(expires_at__isnull=True) | Q(expires_at__gt=now),
        kind=Account.Kind.WALLET, organization_id=organization_id,
    ).order_by("pk")  # locked lowest id first, as lock_wallets does
    return sorted(wallets, key=lambda w: (w.spend_priority, w.expires_at is None,
                                          w.expires_at or now, w.pk))


def hold_for_job(job: Job, amount: int | None = None) -> list[Hold]:
    """Reserve what `job` may cost (or `amount`), or raise InsufficientCredits or
    BudgetExceeded. Run inside the submission's transaction, after its organization's row lock
    (which also keeps its budgets' checks apart): a refusal queues nothing."""
    amount = _most_it_may_cost(job) if amount is None else amount
    if amount == 0:
        return []
    check_budgets(job, amount)
    return _draw(job, amount)


def _draw(job: Job, amount: int) -> list[Hold]:
    """Hold `amount` for `job` from its organization's wallets in their spending order, or
    raise InsufficientCredits."""
    if amount == 0:
        return []
    wallets = spendable_wallets(job.organization_id)
    available = sum(max(0, w.available) for w in wallets)
    if available < amount:
        count_refusal(InsufficientCredits.code, organization_id=job.organization_id,
                      needed=amount, available=available)
        raise InsufficientCredits(needed=amount, available=available)
    usage, holds = system_account(USAGE), []
    for wallet in wallets:
        take = min(amount, wallet.available)
        if take <= 0:
            continue
        hold = Hold.objects.create(job=job, account=wallet, amount=take)
        record(Transfer.Kind.HOLD, wallet, usage, take, hold=hold, job_id=job.pk,
               memo=f"job {job.pk}: {job.gpus} GPU for up to {job.time_limit_s} s")
        holds.append(hold)
        amount -= take
        if amount == 0:
            break
    watch_low_credits(job.organization_id)
    return holds


def _lock_holds(job_id: int, *, closed_too: bool = False) -> list[Hold]:
    holds = Hold.objects.select_for_update(no_key=True).filter(job_id=job_id).order_by("pk")
    holds = list(holds if closed_too else holds.filter(closed_at__isnull=True))
    wallets = lock_wallets(h.account_id for h in holds)
    for hold in holds:
        hold.account = wallets[hold.account_id]
    return holds


def meter_attempt(attempt_id: int, *, until: datetime | None, every_s: float = 0.0) -> int:
    """Post what the attempt owes for its run up to `until` beyond what it posted already;
    nothing if it posted less than `every_s` seconds of run ago (a checkpoint every few
    seconds need not be a ledger write every few seconds). The caller has just changed the
    attempt under its fencing token, or ended it (invariant 3: a stale attempt never gets
    here), which also keeps two meterings of it apart."""
    attempt = Attempt.objects.select_for_update(no_key=True).get(pk=attempt_id)
    if until is None or attempt.started_at is None:
        return 0
    if attempt.metered_until and (until - attempt.metered_until).total_seconds() < every_s:
        return 0
    seconds = (until - attempt.started_at).total_seconds()
    owed = cost(attempt.credits_per_hour, seconds) - attempt.credits_metered
    if owed <= 0:
        return 0
    lock_before_ledger(attempt.job_id)  # its end may follow in this transaction
    holds, posted = _lock_holds(attempt.job_id), 0
    if not holds:
        return 0
    usage = system_account(USAGE)  # system accounts after wallets: the ledger's lock order
    for hold in holds:
        take = min(owed - posted, hold.remaining)
        if take <= 0:
            continue
        record(Transfer.Kind.POST, hold.account, usage, take, hold=hold, job_id=attempt.job_id,
               attempt_id=attempt.pk, memo=f"{seconds:.0f} s of attempt {attempt.pk}")
        Hold.objects.filter(pk=hold.pk).update(posted=F("posted") + take)
        posted += take
    # what the holds could not cover is on the house; it is not asked again
    Attempt.objects.filter(pk=attempt.pk).update(credits_metered=F("credits_metered") + owed,
                                                 metered_until=until)
    return posted


def settle_job(job: Job) -> None:
    """At the job's end: refund a job that delivered nothing, then void what its holds have
    left. Called by the transition into a terminal state, in its transaction, so it runs once.
    """
    if _close_holds(job, refund=job.state in REFUNDED_ENDS, memo=f"ended {job.state}"):
        watch_low_credits(job.organization_id)  # what came back may lift it above its threshold


def _most_it_may_cost(job: Job) -> int:
    """The dearest GPUs it accepts, for its whole time limit."""
    return cost(highest_price(job.gpu_types) * job.gpus, job.time_limit_s)


def rehold_for_job(job: Job) -> None:
    """Hold anew for a job whose request changed before it started (jobs/services/amend.py):
    void what its holds keep, then hold what it may cost now, or raise as `hold_for_job` does
    and let the caller's transaction roll both back; nothing when its price did not change.
    Its organization's row is locked."""
    held = sum(h.remaining for h in Hold.objects.filter(job=job, closed_at__isnull=True))
    if held == _most_it_may_cost(job):
        return  # a change that leaves the price (urgency, region, ...) moves no credits
    # every wallet of the organization, lowest id first, before the holds' and the system
    # accounts: the new hold may draw on any of them, and the ledger locks wallets first
    lock_wallets(Account.objects.filter(kind=Account.Kind.WALLET,
                                        organization_id=job.organization_id
                                        ).values_list("pk", flat=True))
    _close_holds(job, refund=False, memo="changed before it started")
    hold_for_job(job)


def hold_longer_limit(job: Job) -> list[Hold]:
    """Hold what a job's longer time limit may cost beyond what it spent and holds now
    (jobs/services/time_limits.py), or raise as `hold_for_job` does: a shorter limit may
    have left it holding nothing. Nothing for a job someone holds, which gave its holds back:
    its release holds by its new limit (one waiting only for the jobs it runs after holds
    still, and holds more now). Its organization's row is locked."""
    holds = list(Hold.objects.filter(job=job))
    held = sum(h.remaining for h in holds if h.closed_at is None)
    if job.state == JobState.HELD and job.hold and not held:
        return []
    spent = sum(h.posted - h.refunded for h in holds)
    return hold_for_job(job, amount=max(0, _most_it_may_cost(job) - spent - held))


def release_beyond_limit(job: Job) -> int:
    """Give back what a job's shorter time limit can no longer cost
    (jobs/services/time_limits.py): its open holds are replaced by one that keeps its most
    by the new limit, less what its tries spent (a hold is voided once, whole). The credits
    given back; none where the wallets left unexpired cannot hold the rest anew, and the job
    settles at its end as before. Its organization's row and its live attempt's are
    locked, so no metering of it runs meanwhile."""
    holds = list(Hold.objects.select_for_update(no_key=True)
                 .filter(job=job, closed_at__isnull=True).order_by("pk"))
    spent = sum(h.posted - h.refunded for h in Hold.objects.filter(job=job))
    held, keep = sum(h.remaining for h in holds), max(0, _most_it_may_cost(job) - spent)
    if held <= keep:
        return 0
    # the holds, then every wallet the new hold may draw on, lowest id first
    lock_wallets(Account.objects.filter(kind=Account.Kind.WALLET,
                                        organization_id=job.organization_id
                                        ).values_list("pk", flat=True))
    back = {h.account_id: 0 for h in holds}
    for hold in holds:
        back[hold.account_id] += hold.remaining
    if sum(max(0, w.available + back.get(w.pk, 0))
           for w in spendable_wallets(job.organization_id)) < keep:
        return 0
    _close_holds(job, refund=False, memo=f"time limit {job.time_limit_s} s")
    _draw(job, keep)  # less than it held: no budget is passed by it
    return held - keep


def free_held_job(job: Job) -> None:
    """A job put on hold reserves nothing while it is held: what its holds keep goes back to
    its wallets (what it spent stays spent) until its release holds again. Called in the
    hold's transaction (jobs/services/job_hold.py); the job has no attempt running."""
    _close_holds(job, refund=False, memo="held")


def hold_released_job(job: Job) -> list[Hold]:
    """Hold again for a job released from its hold: what it may still cost, its most less
    what its earlier tries spent (they stay paid, and the whole never passes its most). Raises
    as `hold_for_job` does, and the caller's transaction rolls the release back. Its
    organization's row is locked. A job whose holds are open still (held before holds were
    given back) is covered already."""
    holds = list(Hold.objects.filter(job=job))
    if any(h.closed_at is None for h in holds):
        return []
    spent = sum(h.posted - h.refunded for h in holds)
    return hold_for_job(job, amount=max(0, _most_it_may_cost(job) - spent))


def _close_holds(job: Job, *, refund: bool, memo: str) -> bool:
    """Void what the job's open holds keep and close them; if `refund`, first give back what
    every hold of it posted, those closed before too (a hold, a release or a shorter time
    limit drew it anew). False when it had none to close or refund."""
    holds, now = _lock_holds(job.pk, closed_too=refund), timezone.now()
    holds = [h for h in holds if h.closed_at is None or h.posted > h.refunded]
    if not holds:
        return False  # the common case of a fleet without prices: one query
    usage = system_account(USAGE)
    for hold in holds:
        back = hold.posted - hold.refunded if refund else 0
        if back:
            record(Transfer.Kind.REFUND, usage, hold.account, back, hold=hold, job_id=job.pk,
                   memo=f"job {job.pk} {memo}")
        if hold.closed_at:  # closed before, with what it posted to give back
            Hold.objects.filter(pk=hold.pk).update(refunded=F("refunded") + back)
            continue
        rest = hold.remaining
        if rest:
            record(Transfer.Kind.VOID, hold.account, usage, rest, hold=hold, job_id=job.pk,
                   memo=f"job {job.pk} {memo}")
        Hold.objects.filter(pk=hold.pk).update(voided=F("voided") + rest,
                                               refunded=F("refunded") + back, closed_at=now)
    return True


def job_credits(job: Job) -> dict[str, int]:
    """What the job holds now, has spent and was refunded, over all its holds."""
    totals = {"held": 0, "spent": 0, "refunded": 0}
    for hold in Hold.objects.filter(job=job):
        totals["held"] += 0 if hold.closed_at else hold.remaining
        totals["spent"] += hold.posted - hold.refunded
        totals["refunded"] += hold.refunded
    return totals
