"""An owner's invitation to join an organization: a one-time link the owner hands over (there
is no e-mail in the stack); its token is stored hashed, as a key's is."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Invitation(models.Model):
    organization = models.ForeignKey("jobs.Organization", on_delete=models.CASCADE,
                                     related_name="invitations")
    role = models.CharField(max_length=10, default="member")  # Membership.Role
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    # set once, by the one acceptance or the revocation that ends it
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"invitation to {self.organization} as {self.role}"

    @staticmethod
    def open_at(now) -> Q:
        """Invitations that may still be accepted at `now`."""
        return Q(used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now)
