"""A maintenance window comes while a job runs on its node: the scheduler drains the node, the
job checkpoints and resumes on another node, and the window's end returns the node."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Attempt, Job
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node
from workers.services.fleet import node_schedule_maintenance
from workers.services.nodes import MAINTENANCE

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fleet():
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5", GPUSCHED_KILL_GRACE_S="10")
    yield group
    group.stop_all()


def _job(job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_a_job_on_a_node_whose_window_comes_checkpoints_and_resumes_elsewhere(bob, fleet):
    purge_broker_and_cache()
    first, second = (f"mw-{uuid.uuid4().hex[:6]}" for _ in range(2))
    fleet.node(first, 2)
    wait_for(lambda: Node.objects.filter(name=first).exists(), 60, "the first node")
    fleet.scheduler()
    job = make_job(bob, gpus=2, run_seconds=20, progress_interval=0.25)
    Job.objects.filter(pk=job.pk).update(checkpointable=True)
    wait_for(lambda: _job(job).state == "RUNNING", 60, "the job to run")
    wait_for(lambda: Attempt.objects.get(job=job).progress > 0.1, 30, "some progress")
    fleet.node(second, 2)
    wait_for(lambda: Node.objects.filter(name=second).exists(), 60, "the second node")

    # the work begins within the kill grace: the next tick drains the node and moves the job
    now = timezone.now()
    at = now + timedelta(seconds=5)
    node_schedule_maintenance(Node.objects.get(name=first), at, now + timedelta(hours=1))
    wait_for(lambda: Node.objects.get(name=first).state == "DRAINING", 30, "the drain")
    assert Node.objects.get(name=first).state_reason == MAINTENANCE
    wait_for(lambda: _job(job).state == "SUCCEEDED", 120, "the job to finish elsewhere")
    tries = list(Attempt.objects.filter(job=job).order_by("id"))
    assert [(t.node.name, t.outcome) for t in tries] == [
        (first, Attempt.Outcome.PREEMPTED), (second, Attempt.Outcome.SUCCEEDED)]
    assert tries[0].exit_code == 75 and tries[0].progress > 0.1
    assert _job(job).retries == 0  # moved, not failed

    # the work is done early: the window's end, moved to now, returns the node by itself
    node_schedule_maintenance(Node.objects.get(name=first), at,
                              timezone.now() + timedelta(seconds=2))
    assert Node.objects.get(name=first).state == "DRAINING"
    wait_for(lambda: Node.objects.get(name=first).state == "ACTIVE", 30, "the window's end")
    assert Node.objects.get(name=first).maintenance_at is None
