"""The calls about the organization itself: what it is and may use, what it sets for
itself, its projects, its members, and its audit trail."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from credits.services.owner_settings import organization_budget, organization_settle
from jobs.api.errors import not_found, refuse_unknown
from jobs.api.paging import PageQuery, page_of
from jobs.api.serializers import (
    ApiKeySerializer,
    MemberSettingsSerializer,
    OrganizationEventSerializer,
    OrganizationSettingsSerializer,
    ProjectSerializer,
)
from jobs.api.throttles import TierRateThrottle
from jobs.services.org_limits import limits_and_usage
from jobs.services.projects import SETTINGS, project_create, project_rows, project_settle
from jobs.services.team import SETTINGS as MEMBER_SETTINGS
from jobs.services.team import member_remove, member_rows, member_settle


class OrganizationDetail(APIView):
    """GET: the caller's organization, its tier, the key in use, each of its limits beside
    what it uses of it now (null: no limit), and what it sets for itself; PATCH sets that
    (a key of scope full, as owners do on the dashboard's team page)."""

    def patch(self, request):
        body = OrganizationSettingsSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        # its tier, caps and name are the operators'
        refuse_unknown(request.data, body.fields, code="not_amendable")
        organization_settle(organization=request.user.organization, api_key=request.auth,
                            changes=body.validated_data)
        request.user.organization.refresh_from_db()
        return self.get(request)

    def get(self, request):
        org, key = request.user.organization, request.auth
        tier = org.tier
        standing = limits_and_usage(org)
        standing["usage"]["requests_per_min"] = TierRateThrottle().made_this_minute(org.pk)
        return Response({
            "slug": org.slug, "name": org.name,
            "suspended": None if org.suspended_at is None else {
                "at": org.suspended_at, "reason": org.suspended_reason},
            "tier": {"name": tier.name, "priority": tier.priority,
                     "start_slo_s": tier.start_slo_seconds, "preemptible": tier.preemptible},
            "key": {"prefix": f"{key.prefix}…", "name": key.name, "scope": key.scope,
                    "user": key.user.get_username() if key.user else None,
                    "expires_at": key.expires_at},
            "dedicated_nodes": [
                {"node": n.name, "gpu_type": n.gpu_type, "gpus": n.gpu_count,
                 "from": n.dedicated_from, "until": n.dedicated_until}
                for n in org.dedicated_nodes.order_by("name")],
            "settings": {"monthly_limit": organization_budget(org),
                         "low_credits_threshold": org.low_credits_threshold,
                         "erase_after_hours": org.erase_after_hours},
            **standing})


class OrganizationEvents(APIView):
    """GET: what the organization's people changed in it, and who, newest first, a page at
    a time (`?limit=`, `?before=`): the audit trail for the organization's own tools."""

    def get(self, request):
        query = PageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        events = request.user.organization.audit_events.select_related(
            "user", "api_key").order_by("-pk")
        page, following = page_of(events, query.validated_data, request, "/api/v1/events")
        return Response({"results": OrganizationEventSerializer(page, many=True).data,
                         "next": following})


class KeyList(APIView):
    """GET: the organization's API keys, newest first, a page at a time (`?limit=`,
    `?before=`): who has which, of what scope, used last when (to the minute), expiring or
    revoked when: what a security review or a rotation reminder reads. Never a secret; made
    and revoked by owners on the dashboard."""

    def get(self, request):
        query = PageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        keys = request.user.organization.api_keys.select_related("user").order_by("-pk")
        page, following = page_of(keys, query.validated_data, request, "/api/v1/keys")
        return Response({"results": ApiKeySerializer(page, many=True, context={
            "now": timezone.now()}).data, "next": following})


class ProjectListCreate(APIView):
    """The organization's projects, the names a job's `project` may take: each one's weight
    inside it, running-GPU cap, monthly budget and the GPUs its jobs hold now. A key of scope
    full makes them, as owners do on the dashboard's team page."""

    def get(self, request):
        return Response({"results": project_rows(request.user.organization)})

    def post(self, request):
        body = ProjectSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        # a misspelt cap must not make a project without one
        refuse_unknown(request.data, body.fields, code="unknown_field")
        org = request.user.organization
        project = project_create(organization=org, api_key=request.auth,
                                 **body.validated_data)
        return Response(project_rows(org, project.name)[0], status=status.HTTP_201_CREATED)


class _SettledDetail(APIView):
    """One of the organization's projects or members, by its name: GET it, PATCH the settings
    sent, all or none, as owners set them on the dashboard's team page."""

    serializer_class: type[serializers.Serializer]
    amendable: tuple[str, ...]  # what a PATCH may send: anything else is `not_amendable`
    noun: str

    def rows(self, org, name: str) -> list[dict]:
        raise NotImplementedError

    def find(self, org, name: str) -> int | None:
        """Its id, or None when the organization has none of that name."""
        raise NotImplementedError

    def settle(self, org, pk: int, api_key, changes: dict) -> None:
        raise NotImplementedError

    def get(self, request, **route: str):
        (name,) = route.values()  # as the route names it: a project's name, a username
        rows = self.rows(request.user.organization, name)
        return Response(rows[0]) if rows else not_found(f"no such {self.noun}")

    def patch(self, request, **route: str):
        (name,) = route.values()
        body = self.serializer_class(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        refuse_unknown(request.data, self.amendable, code="not_amendable")
        org = request.user.organization
        pk = self.find(org, name)
        if pk is None:
            return not_found(f"no such {self.noun}")
        self.settle(org, pk, request.auth, body.validated_data)
        return Response(self.rows(org, name)[0])


class ProjectDetail(_SettledDetail):
    """A project's name stays (jobs carry it)."""

    serializer_class, amendable, noun = ProjectSerializer, SETTINGS, "project"

    def rows(self, org, name: str) -> list[dict]:
        return project_rows(org, name)

    def find(self, org, name: str) -> int | None:
        return org.projects.filter(name=name).values_list("pk", flat=True).first()

    def settle(self, org, pk: int, api_key, changes: dict) -> None:
        project_settle(organization=org, project_id=pk, api_key=api_key, changes=changes)


class MemberList(APIView):
    """The organization's members: their roles, their fair-share weights inside its projects,
    their running-GPU caps beside the GPUs their jobs hold now, and their monthly budgets."""

    def get(self, request):
        return Response({"results": member_rows(request.user.organization)})


class MemberDetail(_SettledDetail):
    """A key of scope full sets a member's share, cap and budget and takes a member out, as
    owners do on the dashboard's team page; roles, owners and invitations stay the owners'
    there (jobs/services/team.py)."""

    serializer_class, amendable, noun = MemberSettingsSerializer, MEMBER_SETTINGS, "member"

    def rows(self, org, name: str) -> list[dict]:
        return member_rows(org, name)

    def find(self, org, name: str) -> int | None:
        return org.memberships.filter(user__username=name).values_list("pk", flat=True).first()

    def settle(self, org, pk: int, api_key, changes: dict) -> None:
        member_settle(organization=org, membership_id=pk, api_key=api_key, changes=changes)

    def delete(self, request, username: str):
        """Take the member out: their dashboard access ends and the organization's keys
        issued to them are revoked; the jobs they sent stay."""
        org = request.user.organization
        pk = self.find(org, username)
        if pk is None:
            return not_found("no such member")
        revoked = member_remove(organization=org, membership_id=pk, api_key=request.auth)
        return Response({"username": username, "keys_revoked": revoked})
