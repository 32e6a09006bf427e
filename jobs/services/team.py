"""What an organization's owners settle for themselves, without an operator: its projects,
how its GPUs are shared among its projects and members (fair-share weights inside the
organization: the scheduler reads them every round; no other organization's share moves),
how many GPUs a project may hold at once, and who else owns it. Its tier, its weight among
organizations and its own running-GPU cap stay the operators' (admin)."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.models import ApiKey, Membership, Organization, Project
from jobs.services.audit import audit
from jobs.services.errors import Conflict, NotFound, ValidationFailed
from jobs.services.tenancy import owner_or_refuse

MIN_WEIGHT, MAX_WEIGHT = 0.01, 100.0  # a share inside the organization, against the others'
MAX_PROJECTS = 100
PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,59}")
Role = Membership.Role


def _weight(value: float) -> float:
    if not MIN_WEIGHT <= value <= MAX_WEIGHT:  # NaN is refused too
        raise ValidationFailed(f"a weight is {MIN_WEIGHT} to {MAX_WEIGHT:g}",
                               code="weight_out_of_range", field="weight")
    return value


def project_create(*, organization: Organization, name: str, user,
                   weight: float = 1.0) -> Project:
    """A new project of the organization: jobs name it to share and budget apart."""
    owner_or_refuse(organization, user, manages="its projects")
    if not PROJECT_NAME.fullmatch(name):
        raise ValidationFailed("a project's name is 1 to 60 lowercase letters, digits, '_' "
                               "or '-', from a letter or digit", code="invalid_project_name",
                               field="name")
    with transaction.atomic():
        Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
        if organization.projects.count() >= MAX_PROJECTS:
            raise Conflict(f"at most {MAX_PROJECTS} projects per organization",
                           code="too_many_projects")
        try:
            with transaction.atomic():
                project = Project.objects.create(organization=organization, name=name,
                                                 weight=_weight(weight))
        except IntegrityError:
            raise Conflict(f"the organization has a project {name!r} already",
                           code="project_exists", field="name") from None
        audit(organization, "project.made", user=user, project=name, weight=weight)
        return project


def project_weigh(*, organization: Organization, project_id: int, weight: float,
                  user) -> Project:
    """Set a project's share of the organization's GPUs against its other projects'."""
    owner_or_refuse(organization, user, manages="its projects")
    with transaction.atomic():
        project = (Project.objects.select_for_update()
                   .filter(organization=organization, pk=project_id).first())
        if project is None:
            raise NotFound("no such project")
        if project.weight != weight:  # one an operator set beyond the range may stay
            audit(organization, "project.weighed", user=user, project=project.name,
                  weight=_weight(weight), was=project.weight)
            project.weight = weight
            project.save(update_fields=["weight"])
    return project


MAX_CAP = 100_000  # GPUs: more than any fleet, so a cap is a number a person meant


def project_cap(*, organization: Organization, project_id: int, cap: int | None,
                user) -> Project:
    """Bound the GPUs a project's jobs hold at once (None: no cap of its own; 0: no new
    work), inside the organization's cap: the next round holds it, running work stays."""
    owner_or_refuse(organization, user, manages="its projects")
    if cap is not None and not 0 <= cap <= MAX_CAP:
        raise ValidationFailed(f"a project's GPU cap is 0 to {MAX_CAP:,}, or none",
                               code="cap_out_of_range", field="running_gpu_cap")
    with transaction.atomic():
        project = (Project.objects.select_for_update()
                   .filter(organization=organization, pk=project_id).first())
        if project is None:
            raise NotFound("no such project")
        if project.running_gpu_cap != cap:
            audit(organization, "project.capped", user=user, project=project.name, cap=cap,
                  was=project.running_gpu_cap)
            project.running_gpu_cap = cap
            project.save(update_fields=["running_gpu_cap"])
    return project


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
                  weight: float | None = None, role: str | None = None) -> Membership:
    """Set a member's share of their projects' GPUs against the other members', or their
    role. The organization keeps at least one owner."""
    owner_or_refuse(organization, user, manages="its members")
    if role is not None and role not in Role.values:
        raise ValidationFailed(f"a role is one of {', '.join(Role.values)}",
                               code="invalid_role", field="role")
    fields: dict = {"weight": weight} if weight is not None else {}
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
            _weight(weight)
        if changed:
            Membership.objects.filter(pk=member.pk).update(**fields)
            audit(organization, "member.changed", user=user,
                  member=member.user.get_username(), changed=changed)
    return Membership.objects.select_related("user").get(pk=member.pk)
