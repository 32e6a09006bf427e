"""Any key reads the organization's keys, never their secrets: who has which, of what scope,
used last when, expiring or revoked when. A key's last use is kept to the minute, so a busy
key's calls do not each write its row."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import ApiKey
from jobs.services.tenancy import api_key_issue
from tests.support.factories import make_member

pytestmark = pytest.mark.django_db


def test_the_keys_are_listed_newest_first_with_what_a_review_needs(api, alice, bob):
    mia = make_member(alice, "mia")
    hers = api_key_issue(organization=alice, name="render", user=mia, scope="jobs")[0]
    old = api_key_issue(organization=alice, name="old", expires_at=timezone.now())[0]
    gone = api_key_issue(organization=alice, name="gone")[0]
    ApiKey.objects.filter(pk=gone.pk).update(revoked_at=timezone.now())
    api_key_issue(organization=bob, name="theirs")
    answer = api.get("/api/v1/keys").json()
    rows = {row["name"]: row for row in answer["results"]}
    assert [row["name"] for row in answer["results"]] == ["gone", "old", "render", "ci"]
    assert answer["next"] is None
    assert {name: row["live"] for name, row in rows.items()} == {
        "gone": False, "old": False, "render": True, "ci": True}
    assert rows["render"]["user"] == "mia" and rows["render"]["scope"] == "jobs"
    assert rows["render"]["prefix"] == f"{hers.prefix}…"
    assert rows["old"]["expires_at"] and rows["gone"]["revoked_at"]
    assert rows["ci"]["last_used_at"] and rows["render"]["last_used_at"] is None
    assert not {"key_hash", "key", "secret"} & set(rows["ci"])
    assert old.key_hash not in str(answer)
    page = api.get("/api/v1/keys?limit=3").json()
    assert [row["name"] for row in api.get(page["next"]).json()["results"]] == ["ci"]


def test_a_keys_last_use_is_written_at_most_once_a_minute(alice):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.raw_key}")
    key = ApiKey.objects.get(organization=alice)
    assert key.last_used_at is None
    client.get("/api/v1/organization")
    first = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first is not None
    client.get("/api/v1/organization")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first  # no write within the minute
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=first - timedelta(minutes=2))
    client.get("/api/v1/organization")
    assert ApiKey.objects.get(pk=key.pk).last_used_at > first
