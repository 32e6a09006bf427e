"""Owners bring people in without an operator: an invitation link, shown once, joins whoever
opens it (logged in, or with an account made there) once, in its role, for a week; a spent,
revoked or expired link joins nobody; a refused password makes no account; members cannot
invite; racing acceptances spend the link once."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from jobs.models import Invitation, Membership, OrganizationEvent
from jobs.models.tenancy import hash_key
from jobs.services.errors import ServiceError
from jobs.services.invitations import invitation_accept, invitation_create
from tests.support.factories import make_member
from tests.support.threads import race

pytestmark = pytest.mark.django_db
User = get_user_model()
GOOD_PASSWORD = "a heron at dawn, twice"


def _invite(owner, role: str = "member") -> str:
    answer = owner.post("/dashboard/team/alice/invitations", {"role": role})
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    link = re.search(r'class="invitation-link">([^<]+)<', answer.content.decode()).group(1)
    return link.removeprefix("http://testserver")


def test_a_new_person_makes_an_account_and_joins_once(owner, alice):
    path = _invite(owner, role="owner")
    token = path.rsplit("/", 1)[1]
    assert not Invitation.objects.filter(token_hash=token).exists()  # stored hashed
    assert token not in owner.get("/dashboard/team").content.decode()  # shown once
    guest = Client()
    page = guest.get(path)
    assert page.status_code == 200 and "as owner" in " ".join(page.content.decode().split())
    assert page["Referrer-Policy"] == "no-referrer"
    joined = guest.post(path, {"username": "nia", "password": GOOD_PASSWORD})
    assert joined.status_code == 302 and joined["Location"] == "/dashboard/team"
    nia = User.objects.get(username="nia")
    assert Membership.objects.get(user=nia).role == "owner"
    assert "alice" in guest.get("/dashboard/team").content.decode()  # logged in
    assert Client().get(path).status_code == 410  # spent
    again = Client().post(path, {"username": "nia2", "password": GOOD_PASSWORD})
    assert again.status_code == 410 and not User.objects.filter(username="nia2").exists()
    event = OrganizationEvent.objects.get(action="member.joined")
    assert (event.user, event.detail["role"]) == (nia, "owner")


def test_someone_with_an_account_joins_logged_in(owner, alice, bob):
    path = _invite(owner)
    ben = make_member(bob, "ben")
    guest = Client()
    guest.force_login(ben)
    assert "Join as ben" in guest.get(path).content.decode()
    assert guest.post(path).status_code == 302
    assert set(Membership.objects.filter(user=ben).values_list("organization__slug",
                                                                flat=True)) == {"alice", "bob"}


@pytest.mark.parametrize("form, code", [
    ({"username": "nia", "password": "short"}, "too short"),
    ({"username": "nia", "password": "1234567890123"}, "entirely numeric"),
    ({"username": "nia", "password": "password1234"}, "too common"),
    ({"username": "bad name!", "password": GOOD_PASSWORD}, "username"),
    ({"username": "olga", "password": GOOD_PASSWORD}, "taken"),
])
def test_a_refused_account_is_not_made_and_the_link_stays_open(owner, alice, form, code):
    path = _invite(owner)
    answer = Client().post(path, form)
    assert answer.status_code in (400, 409) and code in answer.content.decode()
    assert not User.objects.filter(username__in=["nia", "bad name!"]).exists()
    assert User.objects.filter(username="olga").count() == 1
    assert Client().get(path).status_code == 200


def test_revoked_and_expired_links_join_nobody(owner, alice, olga):
    revoked, expired = _invite(owner), _invite(owner)
    first = Invitation.objects.order_by("pk").first()
    assert owner.post(f"/dashboard/team/alice/invitations/{first.pk}/revoke").status_code == 302
    Invitation.objects.filter(pk=first.pk + 1).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    for path in (revoked, expired):
        assert Client().post(path, {"username": "nia", "password": GOOD_PASSWORD}
                             ).status_code == 410
    assert not User.objects.filter(username="nia").exists()


def test_members_do_not_invite_and_nobody_invites_to_another_organization(client, alice, bob):
    client.force_login(make_member(alice, "mia"))
    assert client.post("/dashboard/team/alice/invitations").status_code == 403
    assert client.post("/dashboard/team/bob/invitations").status_code == 404
    assert not Invitation.objects.exists()


def test_a_member_already_in_keeps_the_link_open(owner, alice, olga):
    path = _invite(owner)
    assert owner.post(path).status_code == 409  # olga is a member already
    assert Client().get(path).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_racing_acceptances_spend_the_link_once(alice, olga):
    _, raw = invitation_create(organization=alice, user=olga)
    people = [User.objects.create_user(f"p{i}") for i in range(4)]
    outcomes: list[str] = []
    race(lambda: outcomes.append(_accept(raw, people.pop())), 4)
    assert sorted(outcomes) == ["invitation_not_open"] * 3 + ["joined"]
    assert Membership.objects.filter(organization=alice).count() == 2  # olga and one


def _accept(raw: str, user) -> str:
    try:
        invitation_accept(raw=raw, user=user)
    except ServiceError as exc:
        return exc.code
    return "joined"


def test_the_link_is_the_credential_and_only_its_hash_is_kept(alice, olga):
    invitation, raw = invitation_create(organization=alice, user=olga)
    assert invitation.token_hash == hash_key(raw) and raw not in str(
        Invitation.objects.values().get())
