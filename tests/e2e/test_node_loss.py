"""kill -9 of a node mid-job: the lease runs out, the job is re-queued and finishes elsewhere."""

import uuid

import pytest

from credits.models import GpuPrice, Hold
from credits.services.grants import credits_grant
from jobs.models import Attempt, Job
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.ledger import assert_ledger_consistent
from tests.support.processes import ProcessGroup, binaries_under, wait_for
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]



@pytest.fixture
def fast_leases():
    group = ProcessGroup(GPUSCHED_LEASE_SECONDS="3", GPUSCHED_HEARTBEAT_SECONDS="0.5",
                         GPUSCHED_NODE_STALE_SECONDS="3", GPUSCHED_RETRY_BACKOFF_S="0.5")
    yield group
    group.stop_all()


def test_a_job_on_a_killed_node_runs_again_on_another(alice, fast_leases):
    purge_broker_and_cache()
    doomed, spare = f"doomed-{uuid.uuid4().hex[:6]}", f"spare-{uuid.uuid4().hex[:6]}"
    doomed_proc = fast_leases.node(doomed, 2)
    wait_for(lambda: Node.objects.filter(name=doomed).exists(), 60, "the first node")
    fast_leases.scheduler()
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # the job pays
    credits_grant(organization=alice, amount=100_000)
    job = make_job(alice, gpus=2, run_seconds=30, progress_interval=0.5)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == "RUNNING", 60, "the job to run")
    first = Attempt.objects.get(job=job)
    assert first.node.name == doomed

    fast_leases.kill(doomed_proc)  # kill -9 of the node's worker processes
    wait_for(lambda: not binaries_under(fast_leases.work_root), 10,
             "the orphaned binary to die with its worker")
    fast_leases.node(spare, 2)
    wait_for(lambda: Attempt.objects.filter(job=job).count() == 2, 60, "a second attempt")
    first.refresh_from_db()
    assert first.outcome == Attempt.Outcome.LOST
    second = Attempt.objects.filter(job=job).latest("id")
    assert second.token > first.token and second.node.name == spare
    states = [e.to_state for e in job.events.all()]
    assert states[:7] == ["QUEUED", "SCHEDULED", "RUNNING", "LOST", "RETRY_WAIT", "QUEUED",
                          "SCHEDULED"]
    # its credits survived the kill: still held for the retry, nothing billed for lost work
    hold = Hold.objects.get(job=job)
    assert hold.closed_at is None and hold.posted == 0 and hold.remaining == hold.amount > 0
    assert_ledger_consistent()
