"""Each change an organization's people make to it (keys, webhooks, projects, weights,
budgets, roles) leaves one event naming who made it and what it was before, written with the
change: a save that changes nothing, or a refused one, leaves none. Its members read them on
the team page; nobody else does."""

import pytest
from django.test import Client

from jobs.models import ApiKey, Membership, OrganizationEvent, Project, WebhookDelivery
from jobs.services.cancellation import job_cancel
from tests.support.factories import make_job, make_member

pytestmark = pytest.mark.django_db


def _events(org) -> list[tuple]:
    return [(e.actor, e.action, e.detail) for e in
            OrganizationEvent.objects.filter(organization=org).order_by("pk")]


def test_an_owners_changes_are_each_recorded_with_what_they_replaced(owner, alice):
    project = Project.objects.get(organization=alice, name="default")
    mia = Membership.objects.get(user=make_member(alice, "mia"))
    owner.post("/dashboard/keys/alice", {"name": "render"})
    key = ApiKey.objects.get(name="render")
    owner.post(f"/dashboard/keys/alice/{key.pk}/revoke")
    owner.post("/dashboard/team/alice/projects", {"name": "ads", "weight": "2"})
    owner.post(f"/dashboard/team/alice/projects/{project.pk}",
               {"weight": "3", "monthly_limit": "500"})
    owner.post(f"/dashboard/team/alice/projects/{project.pk}",
               {"weight": "3", "monthly_limit": "500"})  # the same again: no change
    owner.post(f"/dashboard/team/alice/members/{mia.pk}", {"role": "owner", "weight": "1"})
    owner.post("/dashboard/team/alice/credits", {"monthly_limit": "9000"})
    owner.post("/dashboard/team/alice/credits", {"monthly_limit": ""})
    assert _events(alice) == [
        ("olga", "api_key.made", {"key": f"{key.prefix}…", "name": "render",
                                  "scope": "full", "expires_at": None}),
        ("olga", "api_key.revoked", {"key": f"{key.prefix}…", "name": "render"}),
        ("olga", "project.made", {"project": "ads", "weight": 2.0, "cap": None}),
        ("olga", "project.weighed", {"project": "default", "weight": 3.0, "was": 1.0}),
        ("olga", "budget.set", {"scope": "project alice/default", "monthly_limit": 500,
                                "was": None}),
        ("olga", "member.changed", {"member": "mia", "changed": {"role": ["member",
                                                                          "owner"]}}),
        ("olga", "budget.set", {"scope": "organization alice", "monthly_limit": 9000,
                                "was": None}),
        ("olga", "budget.cleared", {"scope": "organization alice", "monthly_limit": None,
                                    "was": 9000}),
    ]


@pytest.mark.django_db(transaction=True)
def test_a_change_is_logged_once_it_commits_and_a_refused_one_never(owner, alice, caplog):
    caplog.set_level("INFO", logger="jobs.services.audit")
    project = Project.objects.get(organization=alice, name="default")
    refused = owner.post(f"/dashboard/team/alice/projects/{project.pk}", {
        "weight": "5", "monthly_limit": str(10**16)})  # the weight's change rolled back
    assert refused.status_code == 400
    owner.post("/dashboard/team/alice/projects", {"name": "ads"})
    (line,) = [r for r in caplog.records if getattr(r, "audit", None)]
    assert (line.audit, line.organization_id, line.detail["project"]) == (
        "project.made", alice.pk, "ads")


def test_a_refused_change_leaves_no_event(owner, alice):
    project = Project.objects.get(organization=alice, name="default")
    assert owner.post(f"/dashboard/team/alice/projects/{project.pk}",
                      {"weight": "5", "monthly_limit": "-1"}).status_code == 400
    assert owner.post("/dashboard/team/alice/projects", {"name": "Bad Name"}
                      ).status_code == 400
    assert _events(alice) == [] and project.weight == 1.0


def test_a_clients_key_is_named_for_what_it_changed(api, alice, receiver):
    hook = api.post("/api/v1/webhooks", {"url": receiver.url}, format="json").json()
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="FAILED")
    api.post(f"/api/v1/webhooks/{hook['id']}/deliveries/{delivery.pk}/redeliver")
    api.post(f"/api/v1/webhooks/{hook['id']}/deliveries/{delivery.pk}/redeliver")  # pending
    api.delete(f"/api/v1/webhooks/{hook['id']}")
    key = ApiKey.objects.get(name="ci")
    assert [(actor, action) for actor, action, _ in _events(alice)] == [
        (f"key {key.prefix}…", "webhook.added"), (f"key {key.prefix}…", "webhook.resent"),
        (f"key {key.prefix}…", "webhook.removed")]
    assert _events(alice)[2][2] == {"url": receiver.url}


def test_members_read_the_changes_and_nobody_else(owner, alice, bob):
    owner.post("/dashboard/team/alice/projects", {"name": "ads"})
    member, outsider = Client(), Client()
    member.force_login(make_member(alice, "mia"))
    outsider.force_login(make_member(bob, "ben"))
    page = member.get("/dashboard/team").content.decode()
    assert "project.made" in page and "project: ads" in page and "olga" in page
    mia = Membership.objects.get(user__username="mia")
    owner.post(f"/dashboard/team/alice/members/{mia.pk}", {"role": "owner", "weight": "1"})
    assert ("member: mia; changed: {&quot;role&quot;: [&quot;member&quot;, &quot;owner&quot;]}"
            in member.get("/dashboard/team").content.decode())
    assert "project.made" not in outsider.get("/dashboard/team").content.decode()


def test_clients_read_the_trail_a_page_at_a_time(owner, api, alice, bob):
    for name in ("ads", "docs", "eval"):
        owner.post("/dashboard/team/alice/projects", {"name": name})
    owner_of_bob = Client()
    owner_of_bob.force_login(make_member(bob, "ben"))
    Membership.objects.filter(user__username="ben").update(role="owner")
    owner_of_bob.post("/dashboard/team/bob/projects", {"name": "bobs"})
    page = api.get("/api/v1/events?limit=2").json()
    assert [(e["by"], e["action"], e["detail"]["project"]) for e in page["results"]] == [
        ("olga", "project.made", "eval"), ("olga", "project.made", "docs")]
    rest = api.get(page["next"]).json()
    assert [e["detail"]["project"] for e in rest["results"]] == ["ads"]
    assert rest["next"] is None


def test_events_go_after_their_retention_oldest_first_and_are_kept_without_one(alice, bob,
                                                                               settings):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.services.audit import audit, expire_events

    now = timezone.now()
    events = [audit(org, "budget.set", monthly_limit=n) for n, org in enumerate(
        (alice, bob, alice))]
    OrganizationEvent.objects.filter(pk__in=[e.pk for e in events[:2]]).update(
        at=now - timedelta(days=91))
    assert expire_events(now=now) == 0  # kept for ever by default
    settings.GPUSCHED_AUDIT_RETENTION_DAYS = 90
    assert expire_events(now=now) == 2
    assert list(OrganizationEvent.objects.values_list("pk", flat=True)) == [events[2].pk]
    assert expire_events(now=now + timedelta(days=89)) == 0
