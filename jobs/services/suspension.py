"""An operator suspends an organization (unpaid, abusive, under review) and resumes it: while
suspended no new job of it is accepted (403 organization_suspended) or started (the round
sees a running-GPU cap of 0), its running jobs finish, and everything it has stays readable:
its jobs, outputs, logs and credits. Nothing is deleted or preempted. Its webhooks that
subscribed are told of both (organization.suspended, organization.resumed)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from jobs.metrics import count_refusal
from jobs.models import Organization
from jobs.services.audit import audit
from jobs.services.errors import Forbidden, ValidationFailed
from jobs.services.webhooks import notify_organization


class Suspended(Forbidden):
    code = "organization_suspended"


def refuse_if_suspended(org: Organization) -> None:
    """Refuse new work of a suspended organization (called under its row lock)."""
    if org.suspended_at is not None:
        count_refusal(Suspended.code, organization_id=org.pk)
        raise Suspended(f"organization {org.slug} is suspended"
                        + (f": {org.suspended_reason}" if org.suspended_reason else "")
                        + "; its operators resume it")


def organization_suspend(*, organization: Organization, reason: str, by) -> bool:
    """Suspend it (False if it already was: the first reason stands)."""
    reason = reason.strip()
    if not 1 <= len(reason) <= 200:
        raise ValidationFailed("say why, in 1 to 200 characters", code="invalid_reason",
                               field="reason")
    with transaction.atomic():
        done = Organization.objects.filter(pk=organization.pk, suspended_at__isnull=True
                                           ).update(suspended_at=timezone.now(),
                                                    suspended_reason=reason)
        if done:
            audit(organization, "organization.suspended", user=by, reason=reason)
            notify_organization(organization.pk, "organization.suspended",
                                {"organization": organization.slug, "reason": reason})
    return bool(done)


def organization_resume(*, organization: Organization, by) -> bool:
    """Resume it (False if it was not suspended): the next round starts its jobs again."""
    with transaction.atomic():
        current = Organization.objects.select_for_update().get(pk=organization.pk)
        if current.suspended_at is None:
            return False
        Organization.objects.filter(pk=organization.pk).update(suspended_at=None,
                                                               suspended_reason="")
        audit(organization, "organization.resumed", user=by,
              was=current.suspended_reason)
        notify_organization(organization.pk, "organization.resumed",
                            {"organization": organization.slug, "reason": ""})
    return True
