"""Owners bring people into their organization without an operator: an invitation is a
one-time link (no e-mail in the stack: the owner hands it over), valid for a week, for a
role. Whoever opens it joins, with the account they are logged in with or one they make
there. A link is accepted once, however many open it at once; its token is stored hashed."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.models import Invitation, Membership, Organization
from jobs.models.tenancy import hash_key
from jobs.services.audit import audit
from jobs.services.errors import Conflict, NotFound, ValidationFailed
from jobs.services.tenancy import owner_or_refuse

INVITATION_DAYS = 7
MAX_OPEN_INVITATIONS = 20  # per organization: enough for a team's week, no more
Role = Membership.Role


def invitation_create(*, organization: Organization, user=None, role: str = Role.MEMBER,
                      by_operator: bool = False) -> tuple[Invitation, str]:
    """A new invitation and its token, returned here once and never stored: by an owner
    (`user`), or `by_operator` (`manage.py create_organization --invite-owner`: a new
    organization's first owner)."""
    if not by_operator:
        owner_or_refuse(organization, user, manages="its members")
    if role not in Role.values:
        raise ValidationFailed(f"a role is one of {', '.join(Role.values)}",
                               code="invalid_role", field="role")
    with transaction.atomic():  # two at once cannot pass the limit together
        Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
        now = timezone.now()
        if organization.invitations.filter(Invitation.open_at(now)).count() \
                >= MAX_OPEN_INVITATIONS:
            raise Conflict(f"at most {MAX_OPEN_INVITATIONS} open invitations per "
                           f"organization: revoke one first", code="too_many_invitations")
        raw = secrets.token_urlsafe(32)
        invitation = Invitation.objects.create(
            organization=organization, role=role, token_hash=hash_key(raw), created_by=user,
            expires_at=now + timedelta(days=INVITATION_DAYS))
        audit(organization, "member.invited", user=user, role=role,
              expires_at=invitation.expires_at.isoformat())
    return invitation, raw


def invitation_revoke(*, organization: Organization, invitation_id: int, user) -> None:
    """End an open invitation: its link is refused from now on."""
    owner_or_refuse(organization, user, manages="its members")
    with transaction.atomic():
        ended = organization.invitations.filter(
            Invitation.open_at(timezone.now()), pk=invitation_id).update(
            revoked_at=timezone.now())
        if not ended:
            raise NotFound("no such open invitation")
        audit(organization, "invitation.revoked", user=user, invitation=invitation_id)


def invitation_open(raw: str) -> Invitation | None:
    """The invitation a link names while it may be accepted, else None."""
    return (Invitation.objects.select_related("organization")
            .filter(Invitation.open_at(timezone.now()), token_hash=hash_key(raw)).first())


def invitation_accept(*, raw: str, user) -> Membership:
    """`user` joins the invitation's organization in its role; the link is spent."""
    with transaction.atomic():
        invitation = (Invitation.objects.select_for_update().select_related("organization")
                      .filter(Invitation.open_at(timezone.now()), token_hash=hash_key(raw))
                      .first())
        if invitation is None:
            raise NotFound("this invitation was used, revoked or has expired",
                           code="invitation_not_open")
        org = invitation.organization
        if Membership.objects.filter(organization=org, user=user).exists():
            # the link stays open for the one it was meant for
            raise Conflict(f"you are a member of {org.slug} already", code="already_a_member")
        member = Membership.objects.create(organization=org, user=user, role=invitation.role)
        Invitation.objects.filter(pk=invitation.pk).update(used_at=timezone.now(),
                                                          used_by=user)
        audit(org, "member.joined", user=user, role=invitation.role)
    return member


def account_create_and_join(*, raw: str, username: str, password: str):
    """A new dashboard account that joins the invitation's organization at once, or nothing:
    a refused name or password, or a link no longer open, makes no account."""
    User = get_user_model()
    username = username.strip()
    candidate = User(username=username)
    try:
        candidate.full_clean(exclude=["password"], validate_unique=False)
    except ValidationError as exc:
        raise ValidationFailed(" ".join(exc.message_dict.get("username", ["invalid"])),
                               code="invalid_username", field="username") from None
    try:
        validate_password(password, candidate)
    except ValidationError as exc:
        raise ValidationFailed(" ".join(exc.messages), code="weak_password",
                               field="password") from None
    with transaction.atomic():
        try:
            with transaction.atomic():
                user = User.objects.create_user(username=username, password=password)
        except IntegrityError:
            raise Conflict(f"the name {username!r} is taken", code="username_taken",
                           field="username") from None
        invitation_accept(raw=raw, user=user)
    return user
