"""Password guessing on the dashboard's and admin's login: failed logins are counted in the
shared cache per username and per client address (behind proxies, as
`gpusched/client_address.py` reads it) over GPUSCHED_LOGIN_WINDOW_S; past
GPUSCHED_LOGIN_MAX_FAILURES for a username (ten times that for an address, which many
people may share) logins there are refused, the right password too, until the window ends.
A login that succeeds forgets its username's failures. API keys are long random secrets:
no guessing to guard against there."""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest

from gpusched.client_address import client_address

log = logging.getLogger(__name__)
PER_ADDRESS = 10  # an address may fail this many times more than one username


def _keys(request: HttpRequest | None, username: str) -> list[tuple[str, int]]:
    """(cache key, failures allowed) for the username and, with a request, its address."""
    most = settings.GPUSCHED_LOGIN_MAX_FAILURES
    name = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    keys = [(f"gpusched:login-failed:user:{name}", most)]
    if request is not None:
        keys.append((f"gpusched:login-failed:addr:{client_address(request)}",
                     most * PER_ADDRESS))
    return keys


def locked(request: HttpRequest | None, username: str) -> bool:
    """Whether logins for `username` (or from the request's address) are refused now."""
    return any(cache.get(key, 0) >= most for key, most in _keys(request, username))


def failed(request: HttpRequest | None, username: str) -> None:
    for key, _ in _keys(request, username):
        cache.add(key, 0, timeout=settings.GPUSCHED_LOGIN_WINDOW_S)
        try:
            cache.incr(key)
        except ValueError:  # expired between the two: count afresh
            cache.set(key, 1, timeout=settings.GPUSCHED_LOGIN_WINDOW_S)


class GuardedModelBackend(ModelBackend):
    """Django's backend, refusing a locked username or address before the password is
    checked, and counting each failure."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        username = username or kwargs.get("username") or ""
        if locked(request, username):
            log.warning("login refused: too many failures",
                        extra={"login_locked": username[:150]})
            raise PermissionDenied("too many failed logins")
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is None:
            failed(request, username)
        else:
            cache.delete(_keys(None, username)[0][0])
        return user


LOCKED = ValidationError("Too many failed logins for this user or from this address: try "
                         "again later.", code="locked")


class _Guarded:
    """Says why a locked login is refused, instead of blaming the password."""

    def clean(self):
        if locked(self.request, self.data.get("username", "")):
            raise LOCKED
        return super().clean()


class GuardedAuthenticationForm(_Guarded, AuthenticationForm):
    error_messages = {**AuthenticationForm.error_messages,
                      "invalid_login": "Your username and password did not match."}


class GuardedAdminAuthenticationForm(_Guarded, AdminAuthenticationForm):
    pass
