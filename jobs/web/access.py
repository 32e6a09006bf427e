"""Which organizations a dashboard user reaches (those they are a member of, and no other),
and how a page answers a refusal."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from jobs.models import Membership, Organization
from jobs.services.errors import ServiceError


def memberships_of(request: HttpRequest) -> QuerySet[Membership]:
    """The user's memberships, with their organizations, by the organizations' slugs."""
    return (Membership.objects.filter(user=request.user)
            .select_related("organization").order_by("organization__slug"))


def organization_of_member(request: HttpRequest, slug: str) -> Organization:
    """The organization `slug` if the user is a member of it; 404 otherwise."""
    org = Organization.objects.filter(slug=slug, memberships__user=request.user).first()
    if org is None:  # another organization is indistinguishable from none
        raise Http404("no such organization")
    return org


def answered(request: HttpRequest, act: Callable[[], HttpResponse],
             page: Callable[..., HttpResponse]) -> HttpResponse:
    """What `act` answers, or `page` again, with the refusal a service gave and its status."""
    try:
        return act()
    except ServiceError as exc:
        messages.warning(request, exc.message)
        return page(request, status=exc.status)


def told(request: HttpRequest, act: Callable[[], str], back: str,
         page: Callable[..., HttpResponse]) -> HttpResponse:
    """Run `act`, which does what was asked and says what it did; tell the user and go
    `back` (a URL name). A refusal shows `page` again, as `answered` does."""
    def done() -> HttpResponse:
        messages.info(request, act())
        return redirect(back)
    return answered(request, done, page)


def organizations_with_projects(request: HttpRequest) -> QuerySet[Organization]:
    """The user's organizations by slug, their projects read with them."""
    return (Organization.objects.filter(memberships__user=request.user)
            .order_by("slug").prefetch_related("projects"))


def project_targets(orgs) -> list[str]:
    """"org/project" for each project of `orgs` ("org/default" for one without any:
    submission makes it), as the dashboard names a job's project."""
    targets = []
    for org in orgs:
        names = sorted(p.name for p in org.projects.all()) or ["default"]
        targets += [f"{org.slug}/{name}" for name in names]
    return targets
