"""What an organization sets for itself, without an operator: the budget of the whole
organization (credits/services/budgets.py), the threshold below which its webhooks are told
`credits.low` (credits/services/alerts.py), and how long its jobs' content is kept
(jobs/services/retention.py). Set by its owners on the dashboard's team page or by a
client's key of scope `full`; each change audited by its member or key."""

from __future__ import annotations

from django.db import transaction

from credits.models import Budget
from credits.services.alerts import watch_low_credits
from credits.services.budgets import MAX_MONTHLY_LIMIT, budget_set
from jobs.models import ApiKey, Organization
from jobs.services.audit import audit
from jobs.services.errors import ValidationFailed
from jobs.services.retention import retention_set
from jobs.services.tenancy import owner_or_key

SETTINGS = ("monthly_limit", "low_credits_threshold", "erase_after_hours")
MAX_THRESHOLD = MAX_MONTHLY_LIMIT  # credits: past any balance, inside the column


def organization_settle(*, organization: Organization, changes: dict, user=None,
                        api_key: ApiKey | None = None) -> Organization:
    """Set any of `SETTINGS` named in `changes` (a monthly limit of None: no budget), all or
    none. A threshold set above what is available now tells the webhooks at once, as a
    fall below it would."""
    owner_or_key(organization, user=user, api_key=api_key, manages="its settings")
    with transaction.atomic():
        org = Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
        if "low_credits_threshold" in changes:
            _threshold_set(org, changes["low_credits_threshold"], user, api_key)
        if "monthly_limit" in changes:
            budget_set(organization=org, monthly_limit=changes["monthly_limit"], user=user,
                       api_key=api_key)
        if "erase_after_hours" in changes:
            retention_set(org, changes["erase_after_hours"], user=user, api_key=api_key)
    return org


def organization_budget(organization: Organization) -> int | None:
    """The whole organization's monthly limit; None: no budget."""
    return (Budget.objects.filter(organization=organization, project=None, user=None)
            .values_list("monthly_limit", flat=True).first())


def _threshold_set(org: Organization, threshold: int, user, api_key: ApiKey | None) -> None:
    if not 0 <= threshold <= MAX_THRESHOLD:
        raise ValidationFailed(f"a low-credits threshold is 0 (never tell) to {MAX_THRESHOLD} "
                               f"credits", code="threshold_out_of_range",
                               field="low_credits_threshold")
    if threshold == org.low_credits_threshold:
        return
    audit(org, "credits.threshold_set", user=user, api_key=api_key, threshold=threshold,
          was=org.low_credits_threshold)
    org.low_credits_threshold = threshold
    org.save(update_fields=["low_credits_threshold"])
    watch_low_credits(org.pk)  # once committed: the check takes the row's lock itself
