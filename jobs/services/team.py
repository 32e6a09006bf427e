"""What an organization's owners settle for themselves about its people, without an
operator: who is in it, who else owns it, and how its GPUs are shared among its members
(fair-share weights inside a project: the scheduler reads them every round). Its projects:
jobs/services/projects.py. Its tier, its weight among organizations and its own
running-GPU cap stay the operators' (admin)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from jobs.models import ApiKey, Membership, Organization
from jobs.services.audit import audit
from jobs.services.errors import Conflict, NotFound, ValidationFailed
from jobs.services.projects import checked_cap, checked_weight
from jobs.services.tenancy import owner_or_refuse

Role = Membership.Role


class Unset:
    """A setting left as it is (None is a value: no cap)."""


UNSET = Unset()


def _keep_an_owner(organization: Organization, leaving: Membership) -> None:
    """Refuse what would leave the organization without an owner (under its row lock)."""
    if leaving.role == Role.OWNER and not organization.memberships.filter(
            role=Role.OWNER).exclude(pk=leaving.pk).exists():
        raise Conflict("the organization would have no owner left", code="last_owner",
                       field="role")


def member_remove(*, organization: Organization, membership_id: int, user) -> int:
    """Take a member out of the organization (someone who left it): their dashboard access
    ends at once and the organization's live keys issued to them are revoked; the jobs they
    sent stay the organization's. Returns how many keys were revoked."""
    owner_or_refuse(organization, user, manages="its members")
    with transaction.atomic():
        Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
        member = (Membership.objects.select_related("user")
                  .filter(organization=organization, pk=membership_id).first())
        if member is None:
            raise NotFound("no such member")
        _keep_an_owner(organization, member)
        revoked = ApiKey.objects.filter(organization=organization, user=member.user,
                                        revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=user)
        member.delete()
        audit(organization, "member.removed", user=user, member=member.user.get_username(),
              keys_revoked=revoked)
    return revoked


def member_change(*, organization: Organization, membership_id: int, user,
                  weight: float | None = None, role: str | None = None,
                  running_gpu_cap: int | None | Unset = UNSET) -> Membership:
    """Set a member's share of their projects' GPUs against the other members', the GPUs
    their jobs may hold at once over all its projects (None: no cap of their own; the next
    round holds it, running work stays), or their role. The organization keeps at least one
    owner."""
    owner_or_refuse(organization, user, manages="its members")
    if role is not None and role not in Role.values:
        raise ValidationFailed(f"a role is one of {', '.join(Role.values)}",
                               code="invalid_role", field="role")
    fields: dict = {"weight": weight} if weight is not None else {}
    if not isinstance(running_gpu_cap, Unset):
        fields["running_gpu_cap"] = checked_cap(running_gpu_cap)
    with transaction.atomic():  # two owners demoting each other at once: one stays
        Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
        member = (Membership.objects.select_related("user")
                  .filter(organization=organization, pk=membership_id).first())
        if member is None:
            raise NotFound("no such member")
        if role is not None:
            if role != Role.OWNER:
                _keep_an_owner(organization, member)
            fields["role"] = role
        changed = {name: [getattr(member, name), value] for name, value in fields.items()
                   if getattr(member, name) != value}
        if "weight" in changed:  # one an operator set beyond the range may stay
            checked_weight(weight)
        if changed:
            Membership.objects.filter(pk=member.pk).update(**fields)
            audit(organization, "member.changed", user=user,
                  member=member.user.get_username(), changed=changed)
    return Membership.objects.select_related("user").get(pk=member.pk)
