"""Nodes an operator dedicates to an organization serve its jobs alone, first, from the next
round; others' jobs wait with a reason that says so, or move when evacuated; the clients see
what they may use; the organizations' audit trails say who changed it."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from jobs.models import Attempt, Job, OrganizationEvent
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node, start_placed
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
