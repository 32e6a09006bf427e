"""API-key authentication: `Authorization: Bearer gs_…` (or `X-Api-Key: gs_…`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone
from rest_framework import authentication, exceptions

from jobs.models import ApiKey, Organization
from jobs.models.tenancy import hash_key


@dataclass(frozen=True)
class ApiClient:
    """The authenticated caller: an organization, through one of its keys."""

    organization: Organization
    api_key: ApiKey
    user: object | None = None
    is_authenticated: bool = True


# when a key was last used, to the minute: a write per request would make every call of a
# busy key wait on the same row (a client's 6,000 a minute queue behind each other)
LAST_USED_RESOLUTION = timedelta(minutes=1)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def _raw_key(self, request) -> str | None:
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            return header[7:].strip()
        return request.headers.get("X-Api-Key")

    def authenticate(self, request):
        raw = self._raw_key(request)
        if not raw:
            return None
        now = timezone.now()
        key = (ApiKey.objects.select_related("organization__tier", "user")
               .filter(ApiKey.live_at(now), key_hash=hash_key(raw)).first())
        if key is None:
            raise exceptions.AuthenticationFailed("unknown, expired or revoked API key")
        if key.last_used_at is None or now - key.last_used_at >= LAST_USED_RESOLUTION:
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        return ApiClient(key.organization, key, key.user), key

    def authenticate_header(self, request) -> str:
        return "Bearer"
