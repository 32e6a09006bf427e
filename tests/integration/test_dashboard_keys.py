"""An organization's owners make and revoke its API keys on the dashboard; a new key is shown
once and works at once, a revoked one is refused at once; members only look; nobody reaches
another organization's keys."""

import re

import pytest
from rest_framework.test import APIClient

from jobs.models import ApiKey
from jobs.services import tenancy
from tests.support.factories import make_member

pytestmark = pytest.mark.django_db


def _api(raw: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def test_an_owner_makes_a_key_that_works_at_once_and_is_shown_once(owner, alice):
    answer = owner.post("/dashboard/keys/alice", {"name": "render service"})
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    raw = re.search(r'class="new-key">([^<]+)<', answer.content.decode()).group(1)
    assert _api(raw).get("/api/v1/jobs").status_code == 200
    assert (f"export GPUSCHED_URL=http://testserver GPUSCHED_API_KEY={raw}<"  # for `gpusched`
            in answer.content.decode())
    key = ApiKey.objects.get(name="render service")
    assert (key.organization, key.user.username) == (alice, "olga")
    page = owner.get("/dashboard/keys").content.decode()
    assert f"{key.prefix}…" in page and raw not in page  # listed, never shown again
    submitted = _api(raw).post("/api/v1/jobs", {"prompt": "a fox"}, format="json").json()
    assert _api(raw).get(submitted["url"]).status_code == 200


def test_an_owner_revokes_a_key_and_it_is_refused_at_once(owner, alice):
    key, raw = tenancy.api_key_issue(organization=alice, name="old")
    assert _api(raw).get("/api/v1/jobs").status_code == 200
    answer = owner.post(f"/dashboard/keys/alice/{key.pk}/revoke", follow=True)
    assert "is revoked" in answer.content.decode()
    refused = _api(raw).get("/api/v1/jobs")
    assert (refused.status_code, refused.json()["error"]["code"]) == (
        401, "authentication_failed")
    first = ApiKey.objects.get(pk=key.pk).revoked_at
    owner.post(f"/dashboard/keys/alice/{key.pk}/revoke")  # again: it stays as it was
    assert ApiKey.objects.get(pk=key.pk).revoked_at == first


def test_a_member_looks_and_changes_nothing(client, alice):
    key, raw = tenancy.api_key_issue(organization=alice, name="deploy")
    client.force_login(make_member(alice, "mia"))
    page = client.get("/dashboard/keys").content.decode()
    assert f"{key.prefix}…" in page and "Make a key" not in page and "Revoke" not in page
    assert client.post("/dashboard/keys/alice", {"name": "mine"}).status_code == 403
    assert client.post(f"/dashboard/keys/alice/{key.pk}/revoke").status_code == 403
    assert not ApiKey.objects.filter(name="mine").exists() and not ApiKey.objects.filter(
        revoked_at__isnull=False).exists()
    assert _api(raw).get("/api/v1/jobs").status_code == 200


def test_nobody_reaches_another_organizations_keys(owner, bob):
    key, raw = tenancy.api_key_issue(organization=bob, name="bobs")
    assert f"{key.prefix}…" not in owner.get("/dashboard/keys").content.decode()
    assert owner.post("/dashboard/keys/bob", {"name": "x"}).status_code == 404
    assert owner.post(f"/dashboard/keys/bob/{key.pk}/revoke").status_code == 404
    # its own organization's path with another's key id: no such key
    assert owner.post(f"/dashboard/keys/alice/{key.pk}/revoke").status_code == 404
    assert _api(raw).get("/api/v1/jobs").status_code == 200


@pytest.mark.parametrize("name", ["", "   ", "k" * 81, "nul\x00"])
def test_a_bad_name_makes_no_key(owner, name):
    before = ApiKey.objects.count()  # the fixture's
    answer = owner.post("/dashboard/keys/alice", {"name": name})
    assert answer.status_code == 400 and ApiKey.objects.count() == before


def test_keys_are_bounded_per_organization(owner, alice, monkeypatch):
    monkeypatch.setattr(tenancy, "MAX_KEYS", 3)  # with the fixture's
    for n in range(2):
        assert owner.post("/dashboard/keys/alice", {"name": f"k{n}"}).status_code == 200
    answer = owner.post("/dashboard/keys/alice", {"name": "one more"})
    assert answer.status_code == 409 and "revoke one first" in answer.content.decode()
    assert ApiKey.objects.filter(organization=alice).count() == 3


def test_a_key_made_to_expire_is_refused_once_it_has(owner, alice, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    monkeypatch.setattr(tenancy, "MAX_KEYS", 2)  # the fixture's and this one

    answer = owner.post("/dashboard/keys/alice", {"name": "a week", "days": "7"})
    raw = re.search(r'class="new-key">([^<]+)<', answer.content.decode()).group(1)
    key = ApiKey.objects.get(name="a week")
    assert abs(key.expires_at - timezone.now() - timedelta(days=7)) < timedelta(minutes=1)
    assert _api(raw).get("/api/v1/jobs").status_code == 200
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now())  # its week is over
    refused = _api(raw).get("/api/v1/jobs")
    assert (refused.status_code, refused.json()["error"]["code"]) == (
        401, "authentication_failed")
    # an expired key no longer counts against the organization's live keys
    assert owner.post("/dashboard/keys/alice", {"name": "next"}).status_code == 200


@pytest.mark.parametrize("days", ["0", "-1", "3651", "1.5", "x", "\u00b2", "9" * 4301])
def test_a_key_lasts_whole_days_within_the_bounds(owner, days):
    before = ApiKey.objects.count()
    answer = owner.post("/dashboard/keys/alice", {"name": "k", "days": days})
    assert answer.status_code == 400 and ApiKey.objects.count() == before


def test_who_revoked_a_key_is_kept(owner, alice):
    key, _ = tenancy.api_key_issue(organization=alice, name="old")
    owner.post(f"/dashboard/keys/alice/{key.pk}/revoke")
    assert ApiKey.objects.get(pk=key.pk).revoked_by.username == "olga"
    assert "by olga" in owner.get("/dashboard/keys").content.decode()
