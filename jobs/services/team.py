"""What an organization's owners settle for themselves about its people, without an
operator: who is in it, who else owns it, and how its GPUs and credits are shared among its
members (fair-share weights inside a project, which the scheduler reads every round, caps on
running GPUs, monthly budgets). Its projects: jobs/services/projects.py. Its tier, its weight
among organizations and its own running-GPU cap stay the operators' (admin).

A client's key of scope `full` sets members' shares and takes members out, as it sets
projects, for a platform that automates its team; it never changes who owns the
organization: roles, owners' departures and invitations stay with an owner who is logged
in, so a leaked key cannot make anyone an owner or lock the owners out."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from credits.models import Budget
from credits.services.budgets import budget_set
from jobs.models import ApiKey, Membership, Organization
from jobs.services.audit import audit
from jobs.services.errors import Conflict, Forbidden, NotFound, ValidationFailed
from jobs.services.org_limits import running_gpus_by_member
from jobs.services.projects import checked_cap, checked_weight
from jobs.services.tenancy import owner_or_key

Role = Membership.Role
SETTINGS = ("weight", "running_gpu_cap", "monthly_limit")  # what a key may set too
MANAGES = "its members"


def _keep_an_owner(organization: Organization, leaving: Membership) -> None:
    """Refuse what would leave the organization without an owner (under its row lock)."""
    if leaving.role == Role.OWNER and not organization.memberships.filter(
            role=Role.OWNER).exclude(pk=leaving.pk).exists():
        raise Conflict("the organization would have no owner left", code="last_owner",
                       field="role")


def _locked_member(organization: Organization, membership_id: int) -> Membership:
    """The member, under the organization's row lock: two owners acting on its people at
    once act one after the other."""
    Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
    member = (Membership.objects.select_related("user")
              .filter(organization=organization, pk=membership_id).first())
    if member is None:
        raise NotFound("no such member")
    return member


def _owners_only(api_key: ApiKey | None, acts: str) -> None:
    """Refuse a key that would act on an owner's standing: who owns the organization is
    settled by owners, logged in."""
    if api_key is not None:
        raise Forbidden(f"{acts} is an owner's to do, on the dashboard: a key does not "
                        f"change who owns the organization", code="owner_only")


def member_remove(*, organization: Organization, membership_id: int, user=None,
                  api_key: ApiKey | None = None) -> int:
    """Take a member out of the organization (someone who left it): their dashboard access
    ends at once and the organization's live keys issued to them are revoked; the jobs they
    sent stay the organization's. Returns how many keys were revoked. A key takes out
    members, not owners."""
    owner_or_key(organization, user=user, api_key=api_key, manages=MANAGES)
    with transaction.atomic():
        member = _locked_member(organization, membership_id)
        if member.role == Role.OWNER:
            _owners_only(api_key, "taking an owner out")
        _keep_an_owner(organization, member)
        revoked = ApiKey.objects.filter(organization=organization, user=member.user,
                                        revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=user)
        member.delete()
        audit(organization, "member.removed", user=user, api_key=api_key,
              member=member.user.get_username(), keys_revoked=revoked)
    return revoked


def member_settle(*, organization: Organization, membership_id: int, changes: dict,
                  user=None, api_key: ApiKey | None = None) -> Membership:
    """Set any of a member's `SETTINGS` named in `changes`, all or none: their share of their
    projects' GPUs against the other members', the GPUs their jobs may hold at once over all
    its projects (None: no cap of their own; the next round holds it, running work stays),
    what they may commit a month (None: no budget), and, from an owner only, their `role`.
    The organization keeps at least one owner."""
    owner_or_key(organization, user=user, api_key=api_key, manages=MANAGES)
    role = changes.get("role")
    if role is not None and role not in Role.values:
        raise ValidationFailed(f"a role is one of {', '.join(Role.values)}",
                               code="invalid_role", field="role")
    fields = {name: changes[name] for name in ("weight", "running_gpu_cap") if name in changes}
    if "running_gpu_cap" in fields:
        checked_cap(fields["running_gpu_cap"])
    with transaction.atomic():  # two owners demoting each other at once: one stays
        member = _locked_member(organization, membership_id)
        if "monthly_limit" in changes:  # first: an owner who steps down here may not after
            budget_set(organization=organization, member=member.user,
                       monthly_limit=changes["monthly_limit"], user=user, api_key=api_key)
        if role is not None and role != member.role:
            _owners_only(api_key, "changing a role")
            if role != Role.OWNER:
                _keep_an_owner(organization, member)
            fields["role"] = role
        changed = {name: [getattr(member, name), value] for name, value in fields.items()
                   if getattr(member, name) != value}
        if "weight" in changed:  # one an operator set beyond the range may stay
            checked_weight(fields["weight"])
        if changed:
            Membership.objects.filter(pk=member.pk).update(
                **{name: fields[name] for name in changed})
            audit(organization, "member.changed", user=user, api_key=api_key,
                  member=member.user.get_username(), changed=changed)
    return Membership.objects.select_related("user").get(pk=member.pk)


def member_rows(organization: Organization, username: str | None = None) -> list[dict]:
    """The organization's members (or the one named), by username, each with their role,
    their settings and the GPUs the jobs they sent hold now."""
    members = organization.memberships.select_related("user").order_by("user__username")
    if username is not None:
        members = members.filter(user__username=username)
    limits = dict(Budget.objects.filter(organization=organization, user__isnull=False)
                  .values_list("user_id", "monthly_limit"))
    running = running_gpus_by_member(organization)
    return [{"username": m.user.get_username(), "role": m.role, "weight": m.weight,
             "running_gpu_cap": m.running_gpu_cap, "running_gpus": running.get(m.user_id, 0),
             "monthly_limit": limits.get(m.user_id)} for m in members]
