"""What a key may do: every call is checked against its key's scope before its view runs.

A read needs any key; a change needs the scope its view names in `write_scope`, and `full`
where a view names none, so a call added later is closed to narrow keys until someone says
otherwise. A refusal is `403 insufficient_scope` and changes nothing.
"""

from __future__ import annotations

from rest_framework import permissions

from jobs.metrics import count_refusal
from jobs.models import ApiKey
from jobs.services.errors import Forbidden

Scope = ApiKey.Scope
# each scope may do all that the ones before it may
_RANK = {Scope.READ: 0, Scope.JOBS: 1, Scope.FULL: 2}


def needed_scope(method: str, view: object) -> str:
    """The least scope a call by `method` to `view` needs."""
    if method in permissions.SAFE_METHODS:
        return Scope.READ
    return getattr(view, "write_scope", Scope.FULL)


class KeyScopePermission(permissions.BasePermission):
    def has_permission(self, request, view) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):  # only keys carry a scope
            return True
        needed = needed_scope(request.method, view)
        if _RANK[key.scope] < _RANK[needed]:
            # operators see clients sent out with too narrow a key
            count_refusal("insufficient_scope", organization_id=key.organization_id,
                          key=f"{key.prefix}…", scope=key.scope, needed=needed)
            raise Forbidden(f"this key's scope is {key.scope}: this call needs a key of "
                            f"scope {needed} or wider", code="insufficient_scope")
        return True
