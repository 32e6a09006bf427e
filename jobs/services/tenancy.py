"""Tenants: tiers, organizations and their keys."""

from __future__ import annotations

from django.db import transaction

from jobs.defaults import (
    DEFAULT_API_REQUESTS_PER_MIN,
    DEFAULT_SHED_AFTER_BACKLOG_S,
    DEFAULT_TIERS,
    TIER_FIELDS,
)
from jobs.models import ApiKey, Organization, Project, Tier


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


def api_key_issue(*, organization: Organization, name: str, user=None) -> tuple[ApiKey, str]:
    """A new key; the raw value is returned here once and never stored."""
    return ApiKey.issue(organization=organization, name=name, user=user)
