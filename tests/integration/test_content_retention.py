"""An organization keeps its jobs' content no longer than it promised its users: with a
retention of N hours each ended job is erased N hours after its end, by the sweep beat runs
every 5 minutes. Attacked: jobs ended just inside the retention, jobs not ended, another
organization's, a sweep's batch cut short, and bad settings (refused, nothing changed)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job, Organization, OrganizationEvent
from jobs.services import retention
from jobs.services.cancellation import job_cancel
from jobs.services.retention import jobs_erase_due
from jobs.tasks import erase_due_content
from tests.support.factories import make_job

pytestmark = pytest.mark.django_db


def _ended(org, hours_ago: float) -> Job:
    job = make_job(org)
    job_cancel(job=job)
    Job.objects.filter(pk=job.pk).update(
        finished_at=timezone.now() - timedelta(hours=hours_ago))
    return job


def _prompts(*jobs: Job) -> list[str]:
    found = dict(Job.objects.values_list("pk", "prompt"))
    return [found[job.pk] for job in jobs]


def test_a_key_sets_the_retention_and_a_bad_one_is_refused(api, alice):
    answer = api.patch("/api/v1/organization", {"erase_after_hours": 24}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["settings"]["erase_after_hours"] == 24
    for bad in (0, -1, 8785, "soon"):
        refused = api.patch("/api/v1/organization", {"erase_after_hours": bad}, format="json")
        assert refused.status_code == 400, bad
    code = api.patch("/api/v1/organization", {"erase_after_hours": 0}, format="json")
    assert code.json()["error"]["code"] == "retention_out_of_range"
    assert Organization.objects.get(pk=alice.pk).erase_after_hours == 24
    cleared = api.patch("/api/v1/organization", {"erase_after_hours": None}, format="json")
    assert cleared.json()["settings"]["erase_after_hours"] is None
    events = OrganizationEvent.objects.filter(action="retention.set").order_by("pk")
    assert [e.detail for e in events] == [{"erase_after_hours": 24, "was": None},
                                          {"erase_after_hours": None, "was": 24}]


def test_the_sweep_erases_what_ended_past_the_retention_and_nothing_else(alice, bob):
    Organization.objects.filter(pk=alice.pk).update(erase_after_hours=24)
    old, recent, live = _ended(alice, 25), _ended(alice, 23), make_job(alice)
    theirs = _ended(bob, 1000)  # bob keeps content as the service does
    assert erase_due_content() == 1  # what beat runs
    assert _prompts(old, recent, live, theirs) == [
        "", "a cat on a skateboard", "a cat on a skateboard", "a cat on a skateboard"]
    event = OrganizationEvent.objects.get(action="jobs.erased")  # one for the sweep
    assert (event.organization_id, event.detail["erased"]) == (alice.pk, 1)
    assert not OrganizationEvent.objects.filter(action="job.erased").exists()
    assert jobs_erase_due(now=timezone.now()) == 0  # nothing is erased twice
    assert jobs_erase_due(now=timezone.now() + timedelta(hours=2)) == 1  # recent's turn


def test_a_sweep_cut_short_leaves_the_rest_to_the_next_oldest_first(alice, monkeypatch):
    monkeypatch.setattr(retention, "SWEEP_BATCH", 2)
    Organization.objects.filter(pk=alice.pk).update(erase_after_hours=1)
    jobs = [_ended(alice, hours) for hours in (5, 9, 7)]
    assert jobs_erase_due(now=timezone.now()) == 2
    assert _prompts(*jobs) == ["a cat on a skateboard", "", ""]  # the oldest two
    assert jobs_erase_due(now=timezone.now()) == 1
    assert _prompts(*jobs) == ["", "", ""]


def test_one_organizations_backlog_takes_no_more_than_its_share(alice, bob, monkeypatch):
    """alice (made first) turns on a retention over years of ended jobs; bob's few due
    jobs are still erased in the same sweep, and what bob leaves of the batch is alice's."""
    monkeypatch.setattr(retention, "SWEEP_BATCH", 6)
    Organization.objects.filter(pk__in=[alice.pk, bob.pk]).update(erase_after_hours=1)
    backlog = [_ended(alice, 100 + hours) for hours in range(8)]
    few = [_ended(bob, 5)]
    assert jobs_erase_due(now=timezone.now()) == 6
    assert _prompts(*few) == [""]
    assert _prompts(*backlog).count("") == 5  # its share, 3, and the 2 bob left
    details = dict(OrganizationEvent.objects.filter(action="jobs.erased").values_list(
        "organization_id", "detail__erased"))
    assert details == {alice.pk: 5, bob.pk: 1}  # one event each, however many passes


def test_an_owner_sets_the_retention_on_the_team_page(owner, alice):
    page = owner.post("/dashboard/team/alice/credits", {"erase_after_hours": "48"},
                      follow=True).content.decode()
    assert "retention are saved" in page and 'value="48"' in page
    assert Organization.objects.get(pk=alice.pk).erase_after_hours == 48
    refused = owner.post("/dashboard/team/alice/credits", {"erase_after_hours": "9999"})
    assert refused.status_code == 400
    assert Organization.objects.get(pk=alice.pk).erase_after_hours == 48
    owner.post("/dashboard/team/alice/credits", {"erase_after_hours": ""})
    assert Organization.objects.get(pk=alice.pk).erase_after_hours is None


def test_an_operator_sets_the_retention_in_admin_in_range_and_audited(client, alice):
    from django.contrib.auth.models import User
    from django.forms.models import model_to_dict
    from django.urls import reverse

    client.force_login(User.objects.create_superuser("olga", "olga@example.com", "pw"))
    url = reverse("admin:jobs_organization_change", args=[alice.pk])
    form = {k: "" if v is None else v for k, v in model_to_dict(alice).items()}
    refused = client.post(url, {**form, "erase_after_hours": 0})  # would erase every job
    assert refused.status_code == 200 and "A retention is 1 to 8784 hours" in (
        refused.content.decode())
    assert Organization.objects.get(pk=alice.pk).erase_after_hours is None
    assert client.post(url, {**form, "erase_after_hours": 48}).status_code == 302
    assert Organization.objects.get(pk=alice.pk).erase_after_hours == 48
    event = OrganizationEvent.objects.get(action="retention.set")
    assert (event.detail, event.user.username) == ({"erase_after_hours": 48, "was": None},
                                                   "olga")
