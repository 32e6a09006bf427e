"""The dashboard's team page: each of the user's organizations' limits and what it uses of
them, its projects and members, their fair-share weights inside it and their monthly
budgets; its owners make projects and change weights, caps, budgets and roles there
(jobs/services/projects.py, jobs/services/team.py, credits/services/budgets.py)."""

from __future__ import annotations

import math

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from credits.models import Budget
from credits.services.owner_settings import organization_settle
from jobs.models import Invitation, Membership, Organization
from jobs.services.audit import recent_events
from jobs.services.errors import ValidationFailed
from jobs.services.org_limits import limits_and_usage, running_gpus_by_project
from jobs.services.projects import project_create, project_settle
from jobs.services.team import member_remove, member_settle
from jobs.web.access import answered, memberships_of, organization_of_member
from jobs.web.numbers import whole_number


def _budgets(org: Organization) -> dict:
    """Monthly limits by scope: ("project", id), ("user", id) or ("organization", None)."""
    limits = {}
    for budget in Budget.objects.filter(organization=org):
        scope = (("project", budget.project_id) if budget.project_id else
                 ("user", budget.user_id) if budget.user_id else ("organization", None))
        limits[scope] = budget.monthly_limit
    return limits


def _organizations(request: HttpRequest) -> list[dict]:
    memberships = memberships_of(request)
    shown = []
    for m in memberships:
        org, limits = m.organization, _budgets(m.organization)
        running = running_gpus_by_project(org)
        shown.append({
            "org": org, "owner": m.role == Membership.Role.OWNER,
            "budget": limits.get(("organization", None)),
            "projects": [(p, limits.get(("project", p.pk)), running.get(p.pk, 0))
                         for p in org.projects.order_by("name")],
            "members": [(member, limits.get(("user", member.user_id)))
                        for member in org.memberships.select_related("user")
                        .order_by("user__username")],
            "events": recent_events(org), "standing": limits_and_usage(org),
            "invitations": org.invitations.filter(Invitation.open_at(timezone.now()))
            .select_related("created_by").order_by("-pk")})
    return shown


@login_required
def team_page(request: HttpRequest, status: int = 200,
              invited: tuple | None = None) -> HttpResponse:
    return render(request, "dashboard/team.html", {
        "organizations": _organizations(request), "roles": Membership.Role.values,
        "invited": invited}, status=status)


def _weight(form: QueryDict) -> float:
    """The weight the form asks for; 1, as a new project's or member's, when blank."""
    text = form.get("weight", "").strip()
    if not text:
        return 1.0
    try:
        weight = float(text)
    except ValueError:
        weight = math.nan
    if not math.isfinite(weight):
        raise ValidationFailed(f"{text!r} is not a weight", code="weight_out_of_range")
    return weight


def _whole(form: QueryDict, name: str, unit: str, code: str) -> int | None:
    """The whole number the form's field asks for (1,000 and 1_000 read as 1000); None when
    blank: no budget, no cap."""
    text = form.get(name, "").strip().replace(",", "").replace("_", "")
    if not text:
        return None
    number = whole_number(text)
    if number is None:
        raise ValidationFailed(f"{text!r} is not a whole number of {unit}", code=code)
    return number


def _limit(form: QueryDict) -> int | None:
    return _whole(form, "monthly_limit", "credits", "budget_out_of_range")


def _cap(form: QueryDict) -> int | None:
    return _whole(form, "running_gpu_cap", "GPUs", "cap_out_of_range")


def _changed(request: HttpRequest, change, done: str) -> HttpResponse:
    """Apply `change` in one transaction: a refusal leaves everything as it was."""
    def act() -> HttpResponse:
        with transaction.atomic():
            change()
        messages.info(request, done)
        return redirect("dashboard-team")
    return answered(request, act, team_page)


@login_required
@require_POST
def organization_credits(request: HttpRequest, slug: str) -> HttpResponse:
    org = organization_of_member(request, slug)
    return _changed(request, lambda: organization_settle(
        organization=org, user=request.user, changes={
            "monthly_limit": _limit(request.POST),
            "low_credits_threshold": _whole(request.POST, "low_credits_threshold", "credits",
                                            "threshold_out_of_range") or 0,
            "erase_after_hours": _whole(request.POST, "erase_after_hours", "hours",
                                        "retention_out_of_range")}),
        f"{org.slug}'s budget, low-credits notice and retention are saved.")


@login_required
@require_POST
def project_new(request: HttpRequest, slug: str) -> HttpResponse:
    org = organization_of_member(request, slug)
    name = request.POST.get("name", "").strip()
    return _changed(request, lambda: project_create(
        organization=org, name=name, user=request.user, weight=_weight(request.POST)),
        f"Project {name} is made.")


@login_required
@require_POST
def project_save(request: HttpRequest, slug: str, project_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)

    def change() -> None:
        project_settle(organization=org, project_id=project_id, user=request.user, changes={
            "weight": _weight(request.POST), "running_gpu_cap": _cap(request.POST),
            "monthly_limit": _limit(request.POST)})
    return _changed(request, change, "The project is saved.")


@login_required
@require_POST
def member_out(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)

    def act() -> HttpResponse:
        revoked = member_remove(organization=org, membership_id=membership_id,
                                user=request.user)
        messages.info(request, f"The member is out of {org.slug}; {revoked} of their keys "
                               f"revoked.")
        return redirect("dashboard-team")
    return answered(request, act, team_page)


@login_required
@require_POST
def member_save(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)

    def change() -> None:
        member_settle(organization=org, membership_id=membership_id, user=request.user,
                      changes={"weight": _weight(request.POST), "role": request.POST.get(
                          "role") or None, "running_gpu_cap": _cap(request.POST),
                          "monthly_limit": _limit(request.POST)})
    return _changed(request, change, "The member is saved.")
