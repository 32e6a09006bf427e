"""Budgets: an organization caps what a project, a member or the whole organization may commit
in a calendar month. Checked with the hold, under the organization's row lock, so that racing
submissions cannot pass one budget together."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.db.models import F, Q, Sum
from django.utils import timezone

from credits.errors import BudgetExceeded
from credits.models import Budget, Hold
from jobs.metrics import count_refusal
from jobs.models import ApiKey, Job, Organization, Project
from jobs.services.audit import audit
from jobs.services.errors import Conflict, NotFound, ValidationFailed
from jobs.services.tenancy import owner_or_key


def month_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def committed(budget: Budget, *, since: datetime) -> int:
    """What the budget's jobs submitted since `since` reserve or spent: holds less what they
    voided or refunded."""
    holds = Hold.objects.filter(job__organization_id=budget.organization_id,
                                job__created_at__gte=since)
    if budget.project_id:
        holds = holds.filter(job__project_id=budget.project_id)
    elif budget.user_id:
        holds = holds.filter(job__submitted_by_id=budget.user_id)
    total = holds.aggregate(n=Sum(F("amount") - F("voided") - F("refunded")))["n"]
    return total or 0


def budgets_of(job: Job):
    """The budgets a job of this project and submitter counts against."""
    scope = Q(project__isnull=True, user__isnull=True) | Q(project_id=job.project_id)
    if job.submitted_by_id:
        scope |= Q(user_id=job.submitted_by_id)
    return Budget.objects.filter(scope, organization_id=job.organization_id
                                 ).select_related("project__organization", "user")


def check_budgets(job: Job, amount: int) -> None:
    """Raise BudgetExceeded if holding `amount` more for `job` would pass one of its budgets.
    The job's own holds do not exist yet."""
    since = month_start(timezone.now())
    for budget in budgets_of(job):
        used = committed(budget, since=since)
        if used + amount > budget.monthly_limit:
            count_refusal(BudgetExceeded.code, organization_id=job.organization_id,
                          scope=budget.scope, committed=used, needed=amount)
            raise BudgetExceeded(scope=budget.scope, limit=budget.monthly_limit,
                                 committed=used, needed=amount)


def budget_report(organization_id: int) -> list[dict]:
    since = month_start(timezone.now())
    budgets = Budget.objects.filter(organization_id=organization_id).select_related(
        "project__organization", "user").order_by("pk")
    return [{"scope": b.scope, "monthly_limit": b.monthly_limit,
             "committed": committed(b, since=since), "month": since.strftime("%Y-%m")}
            for b in budgets]


MAX_MONTHLY_LIMIT = 10**15  # credits: past any bill, inside the column


def budget_set(*, organization: Organization, monthly_limit: int | None, user=None,
               api_key: ApiKey | None = None, project: Project | None = None,
               member=None) -> Budget | None:
    """An owner (`user`), or the organization's key, caps (or, with None, stops capping)
    what the whole organization, one of its projects or one of its members may commit a
    month. From the next submission on: what is held already stays held."""
    owner_or_key(organization, user=user, api_key=api_key, manages="its budgets")
    if monthly_limit is not None and not 0 <= monthly_limit <= MAX_MONTHLY_LIMIT:
        raise ValidationFailed(f"a monthly limit is 0 to {MAX_MONTHLY_LIMIT} credits",
                               code="budget_out_of_range", field="monthly_limit")
    if project is not None and project.organization_id != organization.pk or (
            member is not None and not organization.memberships.filter(user=member).exists()):
        raise NotFound("no such project or member")
    scope = {"organization": organization, "project": project, "user": member}
    for _ in range(2):
        try:
            with transaction.atomic():
                return _budget_change(scope, monthly_limit, user, api_key)
        except IntegrityError:  # another owner made it meanwhile: change theirs
            continue
    raise Conflict("the budget keeps changing; try again", code="busy")


def _budget_change(scope: dict, monthly_limit: int | None, user,
                   api_key: ApiKey | None) -> Budget | None:
    budget = Budget.objects.select_for_update().filter(**scope).first()
    was = budget.monthly_limit if budget else None
    if was == monthly_limit:
        return budget
    if monthly_limit is None:
        budget.delete()
    elif budget is None:
        budget = Budget.objects.create(**scope, monthly_limit=monthly_limit)
    else:
        budget.monthly_limit = monthly_limit
        budget.save(update_fields=["monthly_limit"])
    audit(scope["organization"], "budget.set" if monthly_limit is not None else
          "budget.cleared", user=user, api_key=api_key, scope=(budget or Budget(**scope)).scope,
          monthly_limit=monthly_limit, was=was)
    return budget if monthly_limit is not None else None
