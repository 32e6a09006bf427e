"""An organization sets its own monthly budget and low-credits threshold, with a key of scope
full or on the dashboard by an owner: admission and the credits.low notice act on them, each
change is audited, a refusal changes nothing, and tier and caps stay the operators'."""

import pytest

from credits.models import Budget, GpuPrice
from credits.services.grants import credits_grant
from jobs.models import Organization, OrganizationEvent, WebhookDelivery, WebhookEndpoint

# on_commit: a threshold is checked against the credits once its change commits
pytestmark = pytest.mark.django_db(transaction=True)


def _notices() -> list[dict]:
    return [d.payload["credits"] for d in WebhookDelivery.objects.filter(event="credits.low")]


@pytest.fixture
def priced(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=10_000)
    WebhookEndpoint.objects.create(organization=alice, url="https://93.184.216.34/hook",
                                   events=["credits.low"])
    return alice


def test_a_key_sets_the_budget_and_threshold_and_admission_acts_on_them(api, priced):
    answer = api.patch("/api/v1/organization", {"monthly_limit": 4_000,
                                                "low_credits_threshold": 2_000}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["settings"] == {"monthly_limit": 4_000, "low_credits_threshold": 2_000,
                                         "erase_after_hours": None}
    assert api.get("/api/v1/organization").json()["settings"]["monthly_limit"] == 4_000
    job = {"prompt": "x", "time_limit_s": 3_000}  # holds 3,000 credits
    assert api.post("/api/v1/jobs", job, format="json").status_code == 202
    over = api.post("/api/v1/jobs", job, format="json")
    assert over.status_code == 402 and over.json()["error"]["code"] == "budget_exceeded"
    events = OrganizationEvent.objects.select_related("api_key").exclude(
        action="credits.granted").order_by("pk")  # the fixture's grant is an operator's
    assert [(e.action, e.api_key.organization_id) for e in events] == [
        ("credits.threshold_set", priced.pk), ("budget.set", priced.pk)]
    assert events[0].detail == {"threshold": 2_000, "was": 0}
    assert _notices() == []  # 7,000 available, above 2,000


def test_a_threshold_above_what_is_available_tells_the_webhooks_at_once_and_once(api, priced):
    api.patch("/api/v1/organization", {"low_credits_threshold": 20_000}, format="json")
    assert _notices() == [{"available": 10_000, "threshold": 20_000}]
    api.patch("/api/v1/organization", {"low_credits_threshold": 30_000}, format="json")
    assert len(_notices()) == 1  # the same fall
    api.patch("/api/v1/organization", {"low_credits_threshold": 0}, format="json")
    assert Organization.objects.get(pk=priced.pk).low_credits_notified is False
    api.patch("/api/v1/organization", {"low_credits_threshold": 20_000}, format="json")
    assert len(_notices()) == 2  # 0 ended the fall: a new one is told


@pytest.mark.parametrize("body, code", [
    ({"low_credits_threshold": -1}, "threshold_out_of_range"),
    ({"low_credits_threshold": 5, "monthly_limit": -1}, "budget_out_of_range"),
    ({"low_credits_threshold": None}, "invalid"),
    ({"monthly_limit": "lots"}, "invalid"),
    ({"running_gpu_cap": 1_000}, "not_amendable"),
    ({"tier": "enterprise", "monthly_limit": 5}, "not_amendable"),
    ([1], "invalid"),
])
def test_a_refused_change_changes_nothing(api, priced, body, code):
    api.patch("/api/v1/organization", {"monthly_limit": 9, "low_credits_threshold": 7},
              format="json")
    before = OrganizationEvent.objects.count()
    answer = api.patch("/api/v1/organization", body, format="json")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == code, answer.content
    org = Organization.objects.get(pk=priced.pk)
    assert (org.low_credits_threshold, org.running_gpu_cap, org.tier.name) == (7, None, "paid")
    assert Budget.objects.get().monthly_limit == 9
    assert OrganizationEvent.objects.count() == before


def test_an_owner_sets_both_on_the_team_page(owner, priced):
    answer = owner.post("/dashboard/team/alice/credits",
                        {"monthly_limit": "1,000", "low_credits_threshold": "20000"})
    assert answer.status_code == 302
    assert Organization.objects.get(pk=priced.pk).low_credits_threshold == 20_000
    assert Budget.objects.get().monthly_limit == 1_000 and len(_notices()) == 1
    page = owner.get("/dashboard/team").content.decode()
    assert 'name="low_credits_threshold" value="20000"' in page
    owner.post("/dashboard/team/alice/credits", {"monthly_limit": "", "low_credits_threshold":
                                                 ""})  # blank: no budget, never told
    assert Organization.objects.get(pk=priced.pk).low_credits_threshold == 0
    assert not Budget.objects.exists()
