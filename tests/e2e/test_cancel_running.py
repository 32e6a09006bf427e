"""Cancelling a running job stops its binary through the heartbeat and frees its GPUs."""

import uuid

import pytest

from jobs.models import Attempt, GpuBinding, Job
from jobs.services.cancellation import job_cancel
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_running_job_is_stopped_and_cancelled(alice):
    purge_broker_and_cache()
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5")
    try:
        name = f"cancel-{uuid.uuid4().hex[:6]}"
        group.node(name, 2)
        wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "the node")
        group.scheduler()
        job = make_job(alice, gpus=2, run_seconds=60, progress_interval=0.25)
        wait_for(lambda: Job.objects.get(pk=job.pk).state == "RUNNING", 60, "the job to run")
        job_cancel(job=Job.objects.get(pk=job.pk))
        wait_for(lambda: Job.objects.get(pk=job.pk).state == "CANCELLED", 30, "cancellation")
    finally:
        group.stop_all()
    # on a loaded machine the agent may start too late for the first lease: that attempt is
    # LOST and retried, which is not what this test is about
    *earlier, attempt = Attempt.objects.filter(job=job).order_by("pk")
    assert all(a.outcome == Attempt.Outcome.LOST for a in earlier)
    assert attempt.outcome == Attempt.Outcome.CANCELLED and attempt.exit_code != 0
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
