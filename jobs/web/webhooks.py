"""The dashboard's webhooks page: each of the user's organizations' endpoints and what was
lately sent to each, whether it arrived and why not; its owners add and remove endpoints and
send a failed delivery again there. A new endpoint's secret is shown once, in the answer
that makes it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from jobs.api.serializers import WebhookEndpointSerializer
from jobs.models import Membership
from jobs.models.webhook import ENDED_EVENTS, EVENTS
from jobs.services.webhook_endpoints import (
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_ping,
    webhook_redeliver,
    webhook_secret_rotate,
)
from jobs.web.access import answered, memberships_of, organization_of_member, told

RECENT = 10  # deliveries shown per endpoint


def _organizations(request: HttpRequest) -> list[dict]:
    memberships = memberships_of(request)
    return [{"org": m.organization, "owner": m.role == Membership.Role.OWNER,
             "hooks": [(hook, hook.deliveries.order_by("-pk")[:RECENT])
                       for hook in m.organization.webhooks.order_by("pk")]}
            for m in memberships]



@login_required
def webhooks_page(request: HttpRequest, new=None, status: int = 200) -> HttpResponse:
    response = render(request, "dashboard/webhooks.html", {
        "organizations": _organizations(request), "new": new, "events": EVENTS,
        "default_events": ENDED_EVENTS}, status=status)
    if new:  # a secret: no cache keeps it
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def webhook_create(request: HttpRequest, slug: str) -> HttpResponse:
    org = organization_of_member(request, slug)
    body = WebhookEndpointSerializer(data={"url": request.POST.get("url", "").strip(),
                                           "events": request.POST.getlist("events")})
    if not body.is_valid():
        problems = "; ".join(f"{field}: {' '.join(map(str, errors))}"
                             for field, errors in body.errors.items())
        messages.warning(request, problems)
        return webhooks_page(request, status=400)
    # the secret is shown in this answer only: a redirect would carry it through the session
    return answered(request, lambda: webhooks_page(request, new=(org, webhook_endpoint_create(
        organization=org, url=body.validated_data["url"],
        events=body.validated_data["events"], user=request.user))), webhooks_page)


@login_required
@require_POST
def webhook_delete(request: HttpRequest, slug: str, hook_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)

    def act() -> str:
        webhook_endpoint_delete(organization=org, hook_id=hook_id, user=request.user)
        return "The endpoint is removed: nothing more is sent to it."
    return told(request, act, "dashboard-webhooks", webhooks_page)


@login_required
@require_POST
def webhook_rotate(request: HttpRequest, slug: str, hook_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)
    # shown in this answer only, as a new endpoint's
    return answered(request, lambda: webhooks_page(request, new=(org, webhook_secret_rotate(
        organization=org, hook_id=hook_id, user=request.user))), webhooks_page)


@login_required
@require_POST
def webhook_ping_view(request: HttpRequest, slug: str, hook_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)

    def act() -> str:
        delivery = webhook_ping(organization=org, hook_id=hook_id, user=request.user)
        return f"A test notice is on its way (delivery {delivery.pk}): its answer shows below."
    return told(request, act, "dashboard-webhooks", webhooks_page)


@login_required
@require_POST
def webhook_resend(request: HttpRequest, slug: str, hook_id: int,
                   delivery_id: int) -> HttpResponse:
    org = organization_of_member(request, slug)

    def act() -> str:
        delivery = webhook_redeliver(organization=org, hook_id=hook_id,
                                     delivery_id=delivery_id, user=request.user)
        return f"Delivery {delivery.pk} ({delivery.event}) is sent again."
    return told(request, act, "dashboard-webhooks", webhooks_page)

