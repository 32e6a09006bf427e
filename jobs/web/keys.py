"""The dashboard's API keys page: each of the user's organizations' keys; its owners make
and revoke them there, without an operator. A new key is shown once, in the answer that
makes it, never stored or sent again."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from jobs.models import ApiKey, Membership
from jobs.services.tenancy import api_key_issue_by_owner, api_key_revoke
from jobs.web.access import answered, memberships_of, organization_of_member, told
from jobs.web.numbers import whole_number


def _organizations(request: HttpRequest) -> list[dict]:
    memberships = memberships_of(request)
    return [{"org": m.organization, "owner": m.role == Membership.Role.OWNER,
             "keys": m.organization.api_keys.select_related("user", "revoked_by")
             .order_by("-pk")}
            for m in memberships]



@login_required
def keys_page(request: HttpRequest, new: tuple | None = None,
              status: int = 200) -> HttpResponse:
    response = render(request, "dashboard/keys.html",
                      {"organizations": _organizations(request), "new": new,
                       "scopes": ApiKey.Scope.choices}, status=status)
    if new:  # a secret: no cache keeps it
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def key_create(request: HttpRequest, slug: str) -> HttpResponse:
    org = organization_of_member(request, slug)
    days = request.POST.get("days", "").strip()

    def act() -> HttpResponse:
        key, raw = api_key_issue_by_owner(
            organization=org, name=request.POST.get("name", ""), user=request.user,
            # what is not a whole number of days is out of range: refused with the rest
            days=(whole_number(days) or 0) if days else None,
            scope=request.POST.get("scope", ApiKey.Scope.FULL))
        # shown in this answer only: a redirect would carry it through the session
        return keys_page(request, new=(org, key, raw))
    return answered(request, act, keys_page)


@login_required
@require_POST
def key_revoke(request: HttpRequest, slug: str, key_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)

    def act() -> str:
        key = api_key_revoke(organization=org, key_id=key_id, user=request.user)
        return f"Key {key.prefix}… ({key.name}) is revoked."
    return told(request, act, "dashboard-keys", keys_page)
