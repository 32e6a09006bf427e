"""An operator suspends an organization and resumes it: while suspended nothing new of it is
accepted (403 organization_suspended, the dry run too, nothing stored) or started (its
waiting jobs say why), its running work goes on, its data stays readable; resumed, the next
round starts its jobs. Both acts are in its audit trail."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from jobs.models import Job, OrganizationEvent
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.suspension import organization_resume, organization_suspend
from tests.support.factories import make_job, make_member, make_node

pytestmark = pytest.mark.django_db
User = get_user_model()


@pytest.fixture
def operator(client):
    client.force_login(User.objects.create_superuser("otto", "o@example.com", "pw"))
    return client


def test_operators_suspend_and_resume_from_the_organization_list(operator, alice, bob):
    chosen = {"action": "suspend", "_selected_action": [alice.pk]}
    form = operator.post("/admin/jobs/organization/", chosen)
    assert form.status_code == 200 and "Suspend 1 organization" in form.content.decode()
    operator.post("/admin/jobs/organization/", {**chosen, "apply": "1",
                                                "reason": "invoice 7 unpaid"}, follow=True)
    alice.refresh_from_db()
    bob.refresh_from_db()
    assert alice.suspended_reason == "invoice 7 unpaid" and bob.suspended_at is None
    mia = Client()
    mia.force_login(make_member(alice, "mia"))
    banner = " ".join(mia.get("/dashboard/").content.decode().split())
    assert "alice is suspended since" in banner and "UTC: invoice 7 unpaid." in banner
    operator.post("/admin/jobs/organization/", {"action": "resume",
                                                "_selected_action": [alice.pk]}, follow=True)
    alice.refresh_from_db()
    assert alice.suspended_at is None
    assert list(OrganizationEvent.objects.filter(organization=alice).order_by("pk")
                .values_list("action", "user__username")) == [
        ("organization.suspended", "otto"), ("organization.resumed", "otto")]


def test_a_suspended_organization_gets_nothing_new_and_keeps_what_it_has(api, alice, bob):
    make_node("n1", gpus=8)
    running = make_job(alice, gpus=2)
    scheduler_tick_run()
    waiting = make_job(alice, gpus=2)
    operator = User.objects.create_superuser("otto", "o@example.com", "pw")
    assert organization_suspend(organization=alice, reason="under review", by=operator)
    assert not organization_suspend(organization=alice, reason="again", by=operator)
    before = Job.objects.count()
    for path in ("/api/v1/jobs", "/api/v1/jobs?dry_run=true"):
        refused = api.post(path, {"prompt": "x"}, format="json")
        assert (refused.status_code, refused.json()["error"]["code"]) == (
            403, "organization_suspended")
        assert "under review" in refused.json()["error"]["message"]
    assert Job.objects.count() == before
    make_job(bob)
    scheduler_tick_run()
    states = dict(Job.objects.values_list("pk", "state"))
    assert states[running.pk] == "SCHEDULED"  # its running work goes on
    assert states[waiting.pk] == "QUEUED"
    assert "may start no new work" in api.get(f"/api/v1/jobs/{waiting.pk}").json()[
        "pending"]["reason"]
    assert Job.objects.get(organization=bob).state == "SCHEDULED"  # others are not held
    standing = api.get("/api/v1/organization").json()
    assert standing["suspended"]["reason"] == "under review"
    assert standing["limits"]["running_gpus"] == 0  # what the round holds it to
    assert api.get("/api/v1/jobs").status_code == 200  # everything stays readable
    assert organization_resume(organization=alice, by=operator)
    scheduler_tick_run()
    assert Job.objects.get(pk=waiting.pk).state == "SCHEDULED"
    assert api.get("/api/v1/organization").json()["suspended"] is None


def test_a_retried_submission_still_finds_the_job_it_made(api, alice):
    first = api.post("/api/v1/jobs", {"prompt": "x"}, format="json",
                     HTTP_IDEMPOTENCY_KEY="k-1")
    organization_suspend(organization=alice, reason="review",
                         by=User.objects.create_superuser("otto", "o@example.com", "pw"))
    again = api.post("/api/v1/jobs", {"prompt": "x"}, format="json",
                     HTTP_IDEMPOTENCY_KEY="k-1")
    assert again.status_code == 202 and again.json()["id"] == first.json()["id"]


def test_endpoints_that_subscribed_are_told_of_both(alice, settings):
    from jobs.models import WebhookDelivery, WebhookEndpoint

    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True
    told = WebhookEndpoint.objects.create(
        organization=alice, url="http://127.0.0.1:9/a",
        events=["organization.suspended", "organization.resumed"])
    WebhookEndpoint.objects.create(organization=alice, url="http://127.0.0.1:9/b")  # jobs only
    operator = User.objects.create_superuser("otto", "o@example.com", "pw")
    organization_suspend(organization=alice, reason="invoice 7 unpaid", by=operator)
    organization_resume(organization=alice, by=operator)
    sent = list(WebhookDelivery.objects.order_by("pk").values_list("endpoint", "event",
                                                                     "payload"))
    assert sent == [
        (told.pk, "organization.suspended", {"event": "organization.suspended",
                                             "organization": "alice",
                                             "reason": "invoice 7 unpaid"}),
        (told.pk, "organization.resumed", {"event": "organization.resumed",
                                           "organization": "alice", "reason": ""})]


def test_a_script_suspends_and_resumes_by_command(alice, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    call_command("suspend_organization", "alice", "--reason", "invoice 7 unpaid")
    alice.refresh_from_db()
    assert alice.suspended_reason == "invoice 7 unpaid"
    call_command("suspend_organization", "alice", "--resume")
    alice.refresh_from_db()
    assert alice.suspended_at is None
    assert capsys.readouterr().out.splitlines() == ["alice is suspended", "alice is resumed"]
    for args in (("nobody", "--resume"), ("alice", "--reason", " ")):
        with pytest.raises(CommandError):
            call_command("suspend_organization", *args)
    event = OrganizationEvent.objects.filter(action="organization.suspended").get()
    assert event.user is None  # a script's act, by no member
