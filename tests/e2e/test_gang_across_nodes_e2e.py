"""A gang spanning two node workers: it runs as one, a crash on either node ends its try and
stops the other, and kill -9 of either node loses it whole, to run again elsewhere."""

import uuid

import pytest

from jobs.models import Attempt, AttemptRank, GpuBinding, Job, StoredCheckpoint, Tier
from jobs.services.tenancy import organization_create
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.processes import ProcessGroup, binaries_under, wait_for
from workers.models import Node
from workers.services.logs import attempt_log

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fleet():
    """Two node workers of 2 GPUs in island r1, and the scheduler; fast leases."""
    purge_broker_and_cache()
    group = ProcessGroup(GPUSCHED_LEASE_SECONDS="3", GPUSCHED_HEARTBEAT_SECONDS="0.5",
                         GPUSCHED_NODE_STALE_SECONDS="3", GPUSCHED_RETRY_BACKOFF_S="0.5",
                         GPUSCHED_KILL_GRACE_S="1", GPUSCHED_PREEMPT_MIN_RUNTIME_S="1")
    tag = uuid.uuid4().hex[:6]
    group.names = [f"g{i}-{tag}" for i in range(3)]
    try:  # a setup that fails must not leave its workers running
        group.workers = [group.node(name, 2, island="r1") for name in group.names[:2]]
        wait_for(lambda: Node.objects.filter(name__in=group.names).count() == 2, 60,
                 "the nodes")
        group.scheduler()
        yield group
    finally:
        group.stop_all()



def _state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


def test_a_gang_runs_on_both_nodes_and_succeeds(alice, fleet):
    job = make_job(alice, gpus=4, run_seconds=2, progress_interval=0.25)
    wait_for(lambda: _state(job) == "SUCCEEDED", 90, "the gang to succeed")
    attempt = Attempt.objects.get(job=job)
    rank = AttemptRank.objects.get(attempt=attempt)
    assert {attempt.node.name, rank.node.name} == set(fleet.names[:2])
    assert rank.started_at is not None and (rank.outcome, rank.exit_code) in {
        ("SUCCEEDED", 0), ("", None)}  # it exits with rank 0, or is stopped by its end
    assert Job.objects.get(pk=job.pk).output
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


def test_a_crash_on_the_second_node_ends_each_try_and_stops_the_first(alice, fleet):
    job = make_job(alice, gpus=4, run_seconds=30, progress_interval=0.25, fail="crash",
                   fail_rank=1, fail_at=0.05)
    wait_for(lambda: _state(job) == "DEAD", 90, "the gang's tries to be spent")
    job.refresh_from_db()
    assert job.error_code == "retries_exhausted" and "[rank 1 of the gang" in job.error
    tries = Attempt.objects.filter(job=job)
    assert tries.count() == 4 and {a.outcome for a in tries} == {"FAILED"}  # 3 retries
    assert set(AttemptRank.objects.filter(attempt__job=job).values_list("outcome", flat=True)
               ) == {"FAILED"}
    # each try's crash is read in the failing node's own log
    for attempt in tries:
        crashed = attempt_log(job, attempt_id=attempt.pk, rank=1, stream="stderr")
        assert b"SimulatedCrash" in crashed.data and crashed.final
    wait_for(lambda: not binaries_under(fleet.work_root), 15, "rank 0's binary to be stopped")
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


def test_kill_9_of_the_second_node_loses_the_gang_and_it_runs_again(alice, fleet):
    job = make_job(alice, gpus=4, run_seconds=20, progress_interval=0.25)
    wait_for(lambda: AttemptRank.objects.filter(attempt__job=job, started_at__isnull=False
                                                ).exists(), 60, "both nodes to run it")
    first = Attempt.objects.get(job=job)
    second_node = AttemptRank.objects.get(attempt=first).node.name
    fleet.kill(fleet.workers[fleet.names.index(second_node)])
    wait_for(lambda: Attempt.objects.get(pk=first.pk).outcome == "LOST", 30, "the loss")
    # rank 0's binary, on the node still alive, is stopped: its gang is gone
    wait_for(lambda: not binaries_under(fleet.work_root), 15, "rank 0's binary to stop")
    fleet.node(fleet.names[2], 2, island="r1")
    wait_for(lambda: _state(job) == "SUCCEEDED", 120, "the gang to run again and succeed")
    retry = Attempt.objects.filter(job=job).latest("pk")
    assert retry.token > first.token
    assert second_node not in {retry.node.name, AttemptRank.objects.get(attempt=retry).node.name}
    assert [e.to_state for e in job.events.all()][:6] == [
        "QUEUED", "SCHEDULED", "RUNNING", "LOST", "RETRY_WAIT", "QUEUED"]


def test_a_gang_preempted_on_both_nodes_makes_way_for_another_and_resumes(bob, fleet):
    # the mechanics of preempting a gang: the free tier gets no floor on this small fleet
    Tier.objects.filter(name="free").update(guaranteed_share=0)
    victim = make_job(bob, gpus=4, run_seconds=20, progress_interval=0.25)
    Job.objects.filter(pk=victim.pk).update(checkpointable=True)
    wait_for(lambda: AttemptRank.objects.filter(attempt__job=victim, started_at__isnull=False
                                                ).exists(), 60, "the gang to run")
    carol = organization_create(slug="carol", tier="enterprise")
    urgent = make_job(carol, gpus=4, run_seconds=1, progress_interval=0.25)
    wait_for(lambda: _state(urgent) == "SUCCEEDED", 90, "the enterprise gang to finish")
    first = Attempt.objects.filter(job=victim).earliest("id")
    assert (first.outcome, first.exit_code, first.preempted_for_id) == ("PREEMPTED", 75,
                                                                        urgent.pk)
    # its nodes, told to stop a heartbeat apart, wrote their checkpoints at one step
    steps = list(StoredCheckpoint.objects.filter(attempt=first).values_list("step", flat=True))
    assert len(steps) == 2 and steps[0] == steps[1] is not None
    # the GPUs freed on both nodes went to the preemptor, as one gang
    taken = Attempt.objects.get(job=urgent)
    assert {taken.node.name, AttemptRank.objects.get(attempt=taken).node.name} == set(
        fleet.names[:2])
    wait_for(lambda: _state(victim) in ("RUNNING", "SUCCEEDED"), 60, "the victim to resume")
    resumed = Attempt.objects.filter(job=victim).latest("id")
    wait_for(lambda: Attempt.objects.get(pk=resumed.pk).progress > 0, 30, "a heartbeat")
    assert Attempt.objects.get(pk=resumed.pk).progress >= first.progress > 0
    wait_for(lambda: _state(victim) == "SUCCEEDED", 90, "the victim to finish")
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
