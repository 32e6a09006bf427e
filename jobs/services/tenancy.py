"""Tenants: tiers, organizations and their keys."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from jobs.defaults import (
    DEFAULT_API_REQUESTS_PER_MIN,
    DEFAULT_SHED_AFTER_BACKLOG_S,
    DEFAULT_TIERS,
    TIER_FIELDS,
)
from jobs.models import ApiKey, Membership, Organization, Project, Tier
from jobs.services.audit import audit
from jobs.services.errors import Conflict, Forbidden, NotFound, ValidationFailed
from jobs.services.storable import unstorable


def tiers_ensure_defaults() -> list[Tier]:
    """Create the default tiers where missing; operators' changes are left alone."""
    tiers = []
    for name, *values in DEFAULT_TIERS:
        defaults = dict(zip(TIER_FIELDS, values, strict=True))
        defaults["shed_after_backlog_s"] = DEFAULT_SHED_AFTER_BACKLOG_S.get(name)
        defaults["api_requests_per_min"] = DEFAULT_API_REQUESTS_PER_MIN.get(name)
        tiers.append(Tier.objects.get_or_create(name=name, defaults=defaults)[0])
    return tiers


@transaction.atomic
def organization_create(*, slug: str, tier: str, name: str = "", weight: float = 1.0
                        ) -> Organization:
    org = Organization.objects.create(slug=slug, name=name or slug, weight=weight,
                                      tier=Tier.objects.get(name=tier))
    Project.objects.create(organization=org, name="default")
    return org


def api_key_issue(*, organization: Organization, name: str, user=None,
                  expires_at: datetime | None = None,
                  scope: str = ApiKey.Scope.FULL) -> tuple[ApiKey, str]:
    """A new key; the raw value is returned here once and never stored."""
    return ApiKey.issue(organization=organization, name=name, user=user, expires_at=expires_at,
                        scope=scope)


MAX_KEYS = 50  # live keys per organization: enough for every service and person, no more
MAX_KEY_DAYS = 3650


def api_key_issue_by_owner(*, organization: Organization, name: str, user,
                           days: int | None = None,
                           scope: str = ApiKey.Scope.FULL) -> tuple[ApiKey, str]:
    """A key an owner of `organization` makes for it (the dashboard), its jobs `user`'s,
    refused after `days` if given, allowed what its `scope` allows (jobs/api/scopes.py)."""
    owner_or_refuse(organization, user)
    if scope not in ApiKey.Scope.values:
        raise ValidationFailed(f"a key's scope is one of {', '.join(ApiKey.Scope.values)}",
                               code="invalid_key_scope", field="scope")
    if days is not None and not 1 <= days <= MAX_KEY_DAYS:
        raise ValidationFailed(f"a key lasts 1 to {MAX_KEY_DAYS} days, or for ever",
                               code="invalid_key_days", field="days")
    name = name.strip()
    if not 1 <= len(name) <= ApiKey._meta.get_field("name").max_length:
        raise ValidationFailed("a key's name is 1 to 80 characters", code="invalid_key_name",
                               field="name")
    if unstorable(name):
        raise ValidationFailed("a key's name holds a character no name can store",
                               code="invalid_key_name", field="name")
    with transaction.atomic():
        Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
        now = timezone.now()
        if organization.api_keys.filter(ApiKey.live_at(now)).count() >= MAX_KEYS:
            raise Conflict(f"at most {MAX_KEYS} live keys per organization: revoke one first",
                           code="too_many_keys")
        key, raw = api_key_issue(organization=organization, name=name, user=user,
                                 expires_at=now + timedelta(days=days) if days else None,
                                 scope=scope)
        audit(organization, "api_key.made", user=user, key=f"{key.prefix}…", name=name,
              scope=scope, expires_at=key.expires_at.isoformat() if key.expires_at else None)
        return key, raw


def api_key_revoke(*, organization: Organization, key_id: int, user) -> ApiKey:
    """Revoke one of `organization`'s keys (an owner's act): refused from then on. A key
    already revoked stays as it was."""
    owner_or_refuse(organization, user)
    with transaction.atomic():
        revoked = ApiKey.objects.filter(pk=key_id, organization=organization,
                                        revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=user)
        key = ApiKey.objects.filter(pk=key_id, organization=organization).first()
        if key is None:
            raise NotFound("no such key")
        if revoked:
            audit(organization, "api_key.revoked", user=user, key=f"{key.prefix}…",
                  name=key.name)
    return key


def owner_or_refuse(organization: Organization, user, manages: str = "its keys") -> None:
    """Refuse (403 not_an_owner) a user who is not an owner of `organization`."""
    if not Membership.objects.filter(organization=organization, user=user,
                                     role=Membership.Role.OWNER).exists():
        raise Forbidden(f"only an owner of the organization manages {manages}",
                        code="not_an_owner")


def owner_or_key(organization: Organization, *, user, api_key: ApiKey | None,
                 manages: str) -> None:
    """Refuse a change that comes neither from an owner (`user`, on the dashboard) nor from
    one of the organization's own keys (`api_key`: a key acts for the whole organization,
    and the API checked that its scope allows the call)."""
    if api_key is None:
        owner_or_refuse(organization, user, manages)
    elif api_key.organization_id != organization.pk:
        raise Forbidden(f"only the organization's own keys manage {manages}",
                        code="not_an_owner")
