"""Per-tier request rates: an organization's API keys together make at most its tier's
`api_requests_per_min` a minute; past it DRF answers 429 with a Retry-After."""

from __future__ import annotations

from rest_framework.throttling import SimpleRateThrottle

from jobs.metrics import count_refusal


class TierRateThrottle(SimpleRateThrottle):
    scope = "tier"

    def get_rate(self) -> None:
        return None  # set per request from the caller's tier (allow_request)

    def allow_request(self, request, view) -> bool:
        client = request.user
        limit = client.organization.tier.api_requests_per_min if client else None
        if not limit:
            return True
        self.rate = f"{limit}/min"
        self.num_requests, self.duration = self.parse_rate(self.rate)
        if super().allow_request(request, view):
            return True
        count_refusal("rate_limited", organization_id=client.organization.pk, limit=limit)
        return False

    def get_cache_key(self, request, view) -> str:
        return self._key(request.user.organization.pk)

    def _key(self, organization_id: int) -> str:
        return self.cache_format % {"scope": self.scope, "ident": organization_id}

    def made_this_minute(self, organization_id: int) -> int:
        """Requests the organization's keys made in the last minute, as counted against its
        limit (this one among them)."""
        since = self.timer() - 60
        return sum(1 for at in self.cache.get(self._key(organization_id), []) if at > since)
