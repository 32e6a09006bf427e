"""An enterprise job preempts a free one; the victim checkpoints, waits, and resumes, on its
own node or on another whose disk it never wrote to."""

import uuid
from pathlib import Path

import pytest
from django.core.files.storage import default_storage

from credits.models import GpuPrice, Transfer
from credits.services.grants import credits_grant
from credits.services.pricing import cost
from jobs.models import Attempt, Job, StoredCheckpoint, Tier
from jobs.services.tenancy import organization_create
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.ledger import assert_ledger_consistent
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node
from workers.services.checkpoints import checkpoints_sweep

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def quick_preemption():
    group = ProcessGroup(GPUSCHED_PREEMPT_MIN_RUNTIME_S="1", GPUSCHED_HEARTBEAT_SECONDS="0.5")
    yield group
    group.stop_all()


def _state(job):
    return Job.objects.get(pk=job.pk).state


def test_a_preempted_job_resumes_from_its_checkpoint(bob, quick_preemption):
    purge_broker_and_cache()
    # on a 2-GPU fleet any floor protects the free job's whole gang; this test is about
    # the mechanics of preempting, so the free tier gets no floor here
    Tier.objects.filter(name="free").update(guaranteed_share=0)
    name = f"pre-{uuid.uuid4().hex[:6]}"
    quick_preemption.node(name, 2)
    wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "the node")
    quick_preemption.scheduler()
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=36_000)  # both pay
    credits_grant(organization=bob, amount=10**6)
    victim = make_job(bob, gpus=2, run_seconds=20, progress_interval=0.25)
    Job.objects.filter(pk=victim.pk).update(checkpointable=True)
    wait_for(lambda: _state(victim) == "RUNNING", 60, "the free job to run")

    carol = organization_create(slug="carol", tier="enterprise")
    credits_grant(organization=carol, amount=10**6)
    urgent = make_job(carol, gpus=2, run_seconds=1, progress_interval=0.25)
    wait_for(lambda: _state(victim) != "RUNNING", 30, "the victim to be asked to stop")
    assert Attempt.objects.filter(job=victim, preempted_for=urgent).count() == 1
    wait_for(lambda: _state(urgent) == "SUCCEEDED", 90, "the enterprise job to finish")
    first = Attempt.objects.filter(job=victim).earliest("id")
    assert (first.outcome, first.exit_code) == (Attempt.Outcome.PREEMPTED, 75)

    wait_for(lambda: _state(victim) in ("RUNNING", "SUCCEEDED"), 60, "the victim to resume")
    victim.refresh_from_db()
    assert victim.preemptions == 1 and victim.attempts.count() == 2
    states = [e.to_state for e in victim.events.all()]
    assert states[:6] == ["QUEUED", "SCHEDULED", "RUNNING", "PREEMPTING", "QUEUED", "SCHEDULED"]
    resumed = Attempt.objects.filter(job=victim).latest("id")
    wait_for(lambda: Attempt.objects.get(pk=resumed.pk).progress > 0, 30, "a heartbeat")
    # it picked up where it stopped, not from zero
    assert Attempt.objects.get(pk=resumed.pk).progress >= first.progress > 0
    # the preempted attempt paid for what its last checkpoint kept, not for what it lost
    kept = (first.last_checkpoint_at - first.started_at).total_seconds()
    paid = sum(Transfer.objects.filter(attempt=first, kind="POST").values_list(
        "amount", flat=True))
    assert first.last_checkpoint_at and paid == cost(first.credits_per_hour, kept) > 0
    assert_ledger_consistent()


def test_a_victim_resumes_from_its_checkpoint_on_a_node_that_never_held_it(bob,
                                                                           quick_preemption):
    """Each node has a work root of its own, as nodes with local disks do: the checkpoint
    written on the first reaches the second through the service's storage."""
    purge_broker_and_cache()
    Tier.objects.filter(name="free").update(guaranteed_share=0)
    roots = {n: Path(quick_preemption.work_root) / n for n in ("a", "b")}
    first_node, second_node = (f"{n}-{uuid.uuid4().hex[:6]}" for n in "ab")
    quick_preemption.node(first_node, 2, GPUSCHED_WORK_ROOT=str(roots["a"]))
    wait_for(lambda: Node.objects.filter(name=first_node).exists(), 60, "the first node")
    quick_preemption.scheduler()
    victim = make_job(bob, gpus=2, run_seconds=20, progress_interval=0.25)
    Job.objects.filter(pk=victim.pk).update(checkpointable=True)
    wait_for(lambda: _state(victim) == "RUNNING", 60, "the free job to run")
    wait_for(lambda: victim.attempts.get().progress > 0.1, 30, "some progress")

    carol = organization_create(slug="carol", tier="enterprise")
    make_job(carol, gpus=2, run_seconds=60, progress_interval=0.25)  # holds the first node
    wait_for(lambda: _state(victim) == "QUEUED", 60, "the victim to stop")
    first = Attempt.objects.filter(job=victim).earliest("id")
    assert (first.outcome, first.exit_code) == (Attempt.Outcome.PREEMPTED, 75)
    [copy] = StoredCheckpoint.objects.filter(job=victim)
    assert (copy.attempt_id, copy.rank) == (first.pk, 0)

    quick_preemption.node(second_node, 2, GPUSCHED_WORK_ROOT=str(roots["b"]))
    wait_for(lambda: _state(victim) in ("RUNNING", "SUCCEEDED"), 90, "the victim to resume")
    resumed = Attempt.objects.filter(job=victim).latest("id")
    assert resumed.node.name == second_node
    wait_for(lambda: Attempt.objects.get(pk=resumed.pk).progress > 0, 30, "a heartbeat")
    # it picked up where it stopped, from a checkpoint its node never wrote
    assert Attempt.objects.get(pk=resumed.pk).progress >= first.progress > 0.1
    wait_for(lambda: _state(victim) == "SUCCEEDED", 90, "the victim to finish")
    assert checkpoints_sweep() >= 1  # (files of earlier runs' jobs of the same id may go too)
    assert not StoredCheckpoint.objects.exists() and not default_storage.exists(copy.name)
