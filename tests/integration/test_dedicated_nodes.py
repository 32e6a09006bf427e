"""Nodes an operator dedicates to an organization serve its jobs alone, first, from the next
round; others' jobs wait with a reason that says so, or move when evacuated; the clients see
what they may use; the organizations' audit trails say who changed it."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from jobs.models import Attempt, Job, OrganizationEvent
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_member, make_node, start_placed
from workers.models import Node
from workers.services.dedication import nodes_dedicate

pytestmark = pytest.mark.django_db


def _node_of(job: Job) -> str:
    return Attempt.objects.get(job=job, ended_at__isnull=True).node.name


def test_only_its_organization_starts_there_and_its_jobs_go_there_first(alice, bob):
    shared, acme = make_node("n1", gpus=8), make_node("n2", gpus=8)
    nodes_dedicate([acme], alice)
    theirs = make_job(bob, gpus=8)
    first, second = make_job(alice, gpus=8), make_job(alice, gpus=8)
    scheduler_tick_run()
    assert _node_of(first) == "n2"  # its own before the shared one, which is first by name
    assert _node_of(theirs) == "n1"
    second.refresh_from_db()
    assert second.state == "QUEUED"  # the shared node is bob's now
    assert shared.dedicated_to is None


def test_a_job_only_dedicated_nodes_could_hold_says_why_and_starts_once_shared(alice, bob):
    acme = make_node("n1", gpus=8)
    nodes_dedicate([acme], alice)
    theirs = make_job(bob)
    scheduler_tick_run()
    theirs.refresh_from_db()
    assert (theirs.state, theirs.pending_code) == ("QUEUED", "dedicated")
    assert "dedicated to other organizations" in theirs.pending_reason
    nodes_dedicate([acme], None)
    scheduler_tick_run()
    theirs.refresh_from_db()
    assert theirs.state == "SCHEDULED"


def test_others_running_there_finish_unless_evacuated(alice, bob):
    node = make_node("n1", gpus=2)
    running = make_job(bob)
    start_placed(running)
    assert nodes_dedicate([node], alice) == 0
    assert Job.objects.get(pk=running.pk).state == "RUNNING"
    mine = make_job(alice)
    start_placed(mine)
    from django.test import Client

    metrics = Client().get("/metrics").content.decode()  # reserved, and how much is used
    for in_use, n in (("true", 2), ("false", 0)):  # bob's job and alice's hold both GPUs
        line = (f'gpusched_dedicated_gpus{{gpu_type="H100",in_use="{in_use}",'
                f'organization="alice"}} {n}.0')
        assert (line in metrics) == bool(n), line
    assert nodes_dedicate([node], alice, evacuate=True) == 1  # bob's alone
    assert Job.objects.get(pk=running.pk).state == "PREEMPTING"
    assert Job.objects.get(pk=mine.pk).state == "RUNNING"
    assert "dedicated to another organization (alice)" in (
        Job.objects.get(pk=running.pk).events.last().reason)


def test_clients_see_what_they_may_use_and_the_trails_who_changed_it(alice, bob, api, client):
    from rest_framework.test import APIClient

    make_node("n1", gpus=8)
    acme = make_node("n2", gpus=4)
    operator = get_user_model().objects.create_superuser("op", password="pw-op-1")
    client.force_login(operator)
    asked = client.post("/admin/workers/node/", {"action": "dedicate",
                                                 "_selected_action": [acme.pk]})
    assert asked.status_code == 200 and b"Dedicate" in asked.content  # it asks first
    client.post("/admin/workers/node/", {"action": "dedicate", "apply": "Dedicate",
                                         "organization": "alice", "_selected_action": [acme.pk]})
    assert Node.objects.get(pk=acme.pk).dedicated_to == alice
    assert api.get("/api/v1/organization").json()["dedicated_nodes"] == [
        {"node": "n2", "gpu_type": "H100", "gpus": 4, "from": None, "until": None}]
    client.force_login(make_member(alice, "ann"))  # and its members on the team page
    assert "n2 (4 H100)" in client.get("/dashboard/team").content.decode()
    client.force_login(operator)
    mine = api.get("/api/v1/gpu-types").json()["results"][0]
    assert (mine["gpus"], mine["dedicated_gpus"], mine["most_on_one_node"]) == (12, 4, 8)
    bobs = APIClient()
    bobs.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    theirs = bobs.get("/api/v1/gpu-types").json()["results"][0]
    assert (theirs["gpus"], theirs["dedicated_gpus"]) == (8, 0)
    call_command("node_dedicate", "n2", "--org", "bob")
    call_command("node_dedicate", "n2", "--shared")
    with pytest.raises(CommandError):
        call_command("node_dedicate", "n2", "n9", "--org", "bob")
    with pytest.raises(CommandError):
        call_command("node_dedicate", "n2", "--org", "nobody")
    trail = [(e.organization.slug, e.action, e.detail["nodes"])
             for e in OrganizationEvent.objects.order_by("pk")]
    assert trail == [("alice", "nodes.dedicated", ["n2"]), ("alice", "nodes.shared", ["n2"]),
                     ("bob", "nodes.dedicated", ["n2"]), ("bob", "nodes.shared", ["n2"])]
    assert OrganizationEvent.objects.filter(action="nodes.dedicated").first().user == operator


def test_a_dedication_ahead_holds_others_to_it_then_begins_and_ends_by_itself(alice, bob):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.services.errors import ValidationFailed
    from jobs.services.submission import JobSpec, job_submit
    from workers.services.dedication import dedications_due

    node, now = make_node("n1", gpus=8), timezone.now()
    hour = timedelta(hours=1)
    with pytest.raises(ValidationFailed):
        nodes_dedicate([node], alice, at=now + hour, until=now + hour)
    nodes_dedicate([node], alice, at=now + hour, until=now + 3 * hour)

    def submit(org, hours: float) -> Job:
        return job_submit(organization=org, spec=JobSpec(prompt="x", time_limit_s=round(
            hours * 3600)))
    long, short, mine = submit(bob, 2), submit(bob, 0.5), submit(alice, 2)
    running = start_placed(short)
    assert Attempt.objects.get(job=mine, ended_at__isnull=True).node.name == "n1"
    long.refresh_from_db()
    assert (long.state, long.pending_code) == ("QUEUED", "dedicated")
    assert "dedicated to other organizations by" in long.pending_reason

    assert dedications_due(now) == 0  # not yet
    assert dedications_due(now + hour) == 1  # begun: bob's try moves, alice's stays
    assert Job.objects.get(pk=short.pk).state == "PREEMPTING"
    assert Attempt.objects.get(pk=running.pk).stop_requested == "preempt"
    assert Node.objects.get(pk=node.pk).dedicated_from is None
    assert dedications_due(now + hour) == 0  # once
    assert dedications_due(now + 3 * hour) == 0
    assert Node.objects.get(pk=node.pk).dedicated_to is None  # over: shared again
    ended = OrganizationEvent.objects.filter(action="nodes.shared").get()
    assert (ended.organization, ended.detail["reason"]) == (alice, "its dedication ended")


def test_operators_book_a_dedication_ahead_from_admin_and_a_script(alice, client):
    node = make_node("n1", gpus=8)
    operator = get_user_model().objects.create_superuser("op", password="pw-op-1")
    client.force_login(operator)
    page = client.post("/admin/workers/node/", {
        "action": "dedicate", "apply": "Dedicate", "organization": "alice",
        "at": "2030-01-07 09:00", "hours": "48", "_selected_action": [node.pk]}, follow=True)
    assert "from 2030-01-07 09:00 UTC until 2030-01-09 09:00 UTC" in page.content.decode()
    node.refresh_from_db()
    assert (node.dedicated_from.isoformat(), node.dedicated_until.isoformat()) == (
        "2030-01-07T09:00:00+00:00", "2030-01-09T09:00:00+00:00")
    call_command("node_dedicate", "n1", "--org", "alice", "--at", "2030-02-01T00:00Z",
                 "--hours", "1")
    node.refresh_from_db()
    assert node.dedicated_until.isoformat() == "2030-02-01T01:00:00+00:00"
    with pytest.raises(CommandError):
        call_command("node_dedicate", "n1", "--org", "alice", "--hours", "0")
