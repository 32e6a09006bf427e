"""A node's worker stopped for an upgrade (SIGTERM to it, a warm shutdown) drains its node and
asks its running job to checkpoint and stop, so the job waits to resume instead of being lost
with the node; the worker then exits, and its next start puts the node back in service, where
the job resumes from its checkpoint."""

import os
import signal
import uuid

import pytest

from jobs.models import Attempt, GpuBinding, Job
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node
from workers.services.nodes import WORKER_STOPPING

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


def test_a_stopping_worker_hands_its_job_back_and_takes_it_again_once_started(alice):
    purge_broker_and_cache()
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5", GPUSCHED_KILL_GRACE_S="5")
    try:
        name = f"stop-{uuid.uuid4().hex[:6]}"
        worker = group.node(name, 1)
        wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "the node")
        group.scheduler()
        job = make_job(alice, run_seconds=12, progress_interval=0.25)
        Job.objects.filter(pk=job.pk).update(checkpointable=True)
        wait_for(lambda: Attempt.objects.filter(job=job, progress__gte=0.2).exists(), 60,
                 "the job to make progress")
        os.kill(worker.pid, signal.SIGTERM)  # the worker's own process, as systemd stops it
        assert worker.wait(timeout=30) == 0
        first = Attempt.objects.get(job=job)
        assert (first.outcome, first.exit_code) == ("PREEMPTED", 75)
        assert _state(job) == "QUEUED" and Job.objects.get(pk=job.pk).preemptions == 1
        assert "worker is stopping" in job.events.get(to_state="PREEMPTING").reason
        node = Node.objects.get(name=name)
        assert (node.state, node.state_reason) == ("DRAINING", WORKER_STOPPING)
        assert not GpuBinding.objects.filter(released_at__isnull=True).exists()

        group.node(name, 1)
        wait_for(lambda: _state(job) == "SUCCEEDED", 90, "the job to resume and succeed")
        assert Node.objects.get(name=name).state == "ACTIVE"
        second = Attempt.objects.filter(job=job).latest("id")
        assert second.node.name == name and second.pk != first.pk
        resumed = job.events.filter(to_state="RUNNING").latest("id")
        assert resumed.attempt_id == second.pk
    finally:
        group.stop_all()
