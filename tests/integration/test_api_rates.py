"""Per-tier request rates: an organization's keys share its tier's rate; past it, a 429 with
a Retry-After; other organizations and tiers are not slowed by it."""

import pytest
from rest_framework.test import APIClient

from jobs.models import Tier
from jobs.services.tenancy import api_key_issue
from tests.support.broker import purge_broker_and_cache

pytestmark = pytest.mark.django_db


def _client(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


def test_an_organization_past_its_tiers_rate_gets_a_429_with_retry_after(api, bob, client):
    purge_broker_and_cache()
    Tier.objects.filter(name="free").update(api_requests_per_min=3)
    first, second = _client(bob.raw_key), _client(api_key_issue(organization=bob, name="2")[1])
    assert [c.get("/api/v1/jobs").status_code for c in (first, second, first)] == [200] * 3
    limited = second.get("/api/v1/jobs")  # the organization's keys share its rate
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert all(api.get("/api/v1/jobs").status_code == 200 for _ in range(5))  # paid: 3,000
    assert 'gpusched_requests_refused_total{code="rate_limited"} 1' in client.get(
        "/metrics").content.decode()


def test_every_default_tier_has_a_rate():
    assert dict(Tier.objects.values_list("name", "api_requests_per_min")) == {
        "enterprise": 6000, "paid": 3000, "free": 600}


def test_each_answer_says_where_the_caller_stands(bob, client):
    purge_broker_and_cache()
    Tier.objects.filter(name="free").update(api_requests_per_min=3)
    api = _client(bob.raw_key)
    answers = [api.get("/api/v1/jobs") for _ in range(4)]
    assert [a["RateLimit-Limit"] for a in answers] == ["3"] * 4
    assert [a["RateLimit-Remaining"] for a in answers] == ["2", "1", "0", "0"]
    assert answers[-1].status_code == 429  # the refusal says it too
    assert all(1 <= int(a["RateLimit-Reset"]) <= 60 for a in answers)
    assert "RateLimit-Limit" not in client.get("/healthz")  # nothing counted, nothing said
