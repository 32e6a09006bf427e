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
        return self.cache_format % {"scope": self.scope, "ident": request.user.organization.pk}
