"""Invitations on the dashboard: owners make a one-time link on the team page and hand it
over; whoever opens it joins, logged in or with an account made there
(jobs/services/invitations.py)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from jobs.models import Membership
from jobs.services.errors import ServiceError
from jobs.services.invitations import (
    account_create_and_join,
    invitation_accept,
    invitation_create,
    invitation_open,
    invitation_revoke,
)
from jobs.web.access import answered, organization_of_member, told
from jobs.web.team import team_page


@login_required
@require_POST
def invite(request: HttpRequest, slug: str) -> HttpResponse:
    org = organization_of_member(request, slug)

    def act() -> HttpResponse:
        invitation, raw = invitation_create(organization=org, user=request.user,
                                            role=request.POST.get("role", Membership.Role.MEMBER))
        link = request.build_absolute_uri(reverse("dashboard-join", args=[raw]))
        # shown in this answer only: a redirect would carry it through the session
        response = team_page(request, invited=(org, invitation, link))
        response["Cache-Control"] = "no-store"
        return response
    return answered(request, act, team_page)


@login_required
@require_POST
def invitation_end(request: HttpRequest, slug: str, invitation_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)

    def act() -> str:
        invitation_revoke(organization=org, invitation_id=invitation_id, user=request.user)
        return "The invitation is revoked: its link no longer works."
    return told(request, act, "dashboard-team", team_page)


def join(request: HttpRequest, token: str) -> HttpResponse:
    """GET: whom the link invites, and how to join; POST: join, logged in or as a new
    account. Open to anyone holding the link: the token is the credential."""
    invitation = invitation_open(token)
    if invitation is None:
        return _page(request, None, status=410)
    if request.method != "POST":
        return _page(request, invitation)
    try:
        if request.user.is_authenticated:
            invitation_accept(raw=token, user=request.user)
        else:
            user = account_create_and_join(raw=token,
                                           username=request.POST.get("username", ""),
                                           password=request.POST.get("password", ""))
            login(request, user, backend=settings.AUTHENTICATION_BACKENDS[0])
    except ServiceError as exc:
        return _page(request, invitation, error=exc.message, status=exc.status)
    messages.info(request, f"You joined {invitation.organization.slug} as "
                           f"{invitation.role}.")
    return redirect("dashboard-team")


def _page(request: HttpRequest, invitation, error: str = "", status: int = 200
          ) -> HttpResponse:
    response = render(request, "dashboard/join.html", {
        "invitation": invitation, "error": error,
        "username": request.POST.get("username", "")}, status=status)
    response["Referrer-Policy"] = "no-referrer"  # the link is a credential: never pass it on
    return response
