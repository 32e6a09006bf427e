"""Per-tier request rates: an organization's API keys together make at most its tier's
`api_requests_per_min` a minute; past it DRF answers 429 with a Retry-After. Every answer
under a limit says where the caller stands (`RateLimitHeaders`), so a client slows down
before it is refused."""

from __future__ import annotations

import math
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
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
        allowed = super().allow_request(request, view)
        request._request.rate_limit = self._standing()
        if allowed:
            return True
        count_refusal("rate_limited", organization_id=client.organization.pk, limit=limit)
        return False

    def _standing(self) -> tuple[int, int, int]:
        """(limit, requests left, seconds until the oldest counted request stops counting)."""
        left = max(0, self.num_requests - len(self.history))
        reset = self.duration - (self.now - self.history[-1]) if self.history else 0
        return self.num_requests, left, max(0, math.ceil(reset))

    def get_cache_key(self, request, view) -> str:
        return self._key(request.user.organization.pk)

    def _key(self, organization_id: int) -> str:
        return self.cache_format % {"scope": self.scope, "ident": organization_id}

    def made_this_minute(self, organization_id: int) -> int:
        """Requests the organization's keys made in the last minute, as counted against its
        limit (this one among them)."""
        since = self.timer() - 60
        return sum(1 for at in self.cache.get(self._key(organization_id), []) if at > since)


class RateLimitHeaders:
    """`RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds) on each API
    answer counted against a limit, 429s included: what TierRateThrottle saw."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        standing = getattr(request, "rate_limit", None)
        if standing is not None:
            limit, left, reset = standing
            response["RateLimit-Limit"] = str(limit)
            response["RateLimit-Remaining"] = str(left)
            response["RateLimit-Reset"] = str(reset)
        return response
