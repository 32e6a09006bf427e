"""kill -9 of a node mid-job: the lease runs out, the job is re-queued and finishes elsewhere,
from the last checkpoint it copied where it had one (for a gang, the last step every node
copied)."""

import uuid
from pathlib import Path

import pytest

from credits.models import GpuPrice, Hold, Transfer
from credits.services.grants import credits_grant
from credits.services.pricing import cost
from jobs.models import Attempt, AttemptRank, Job, StoredCheckpoint
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.ledger import assert_ledger_consistent
from tests.support.processes import ProcessGroup, binaries_under, wait_for
from workers.models import Node
from workers.services.checkpoint_cuts import resume_copies
from workers.services.logs import attempt_log

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]



def _kept_s(attempt: Attempt) -> float:
    """How far into the attempt's run its work is kept."""
    at = Attempt.objects.filter(pk=attempt.pk).values_list("last_checkpoint_at", "started_at").get()
    return (at[0] - at[1]).total_seconds() if at[0] else 0.0


def _said(group: ProcessGroup) -> str:
    """Everything the group's processes logged."""
    return "\n".join(log.read_text(errors="replace") for _, _, log in group.procs)


def _own_roots(group: ProcessGroup, *names: str) -> dict[str, str]:
    """A work root for each node, as nodes with local disks have."""
    return {n: str(Path(group.work_root) / n) for n in names}


@pytest.fixture
def own_disks():
    """Fast leases, and copies while a job runs at most once a second (`_own_roots` gives
    each node a disk of its own)."""
    purge_broker_and_cache()
    group = ProcessGroup(GPUSCHED_LEASE_SECONDS="3", GPUSCHED_HEARTBEAT_SECONDS="0.5",
                         GPUSCHED_NODE_STALE_SECONDS="3", GPUSCHED_RETRY_BACKOFF_S="0.5",
                         GPUSCHED_METER_INTERVAL_S="1", GPUSCHED_KILL_GRACE_S="1")
    yield group
    group.stop_all()


def _paying(org) -> None:
    """The job's GPUs have a price, and the organization the credits."""
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=org, amount=100_000)


def _paid(attempt: Attempt) -> int:
    return sum(Transfer.objects.filter(attempt=attempt, kind="POST").values_list(
        "amount", flat=True))


@pytest.fixture
def fast_leases():
    group = ProcessGroup(GPUSCHED_LEASE_SECONDS="3", GPUSCHED_HEARTBEAT_SECONDS="0.5",
                         GPUSCHED_NODE_STALE_SECONDS="3", GPUSCHED_RETRY_BACKOFF_S="0.5",
                         GPUSCHED_LOG_PUBLISH_S="0.5")
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
    wait_for(lambda: b"PROGRESS" in attempt_log(job, attempt_id=first.pk).data, 30,
             "its log to be published as it runs")

    fast_leases.kill(doomed_proc)  # kill -9 of the node's worker processes
    wait_for(lambda: not binaries_under(fast_leases.work_root), 10,
             "the orphaned binary to die with its worker")
    fast_leases.node(spare, 2)
    wait_for(lambda: Attempt.objects.filter(job=job).count() == 2, 60, "a second attempt")
    first.refresh_from_db()
    assert first.outcome == Attempt.Outcome.LOST
    lost = attempt_log(job, attempt_id=first.pk)  # what it printed before the kill stays
    assert lost.data.startswith(b"START ") and lost.final
    second = Attempt.objects.filter(job=job).latest("id")
    assert second.token > first.token and second.node.name == spare
    states = [e.to_state for e in job.events.all()]
    assert states[:7] == ["QUEUED", "SCHEDULED", "RUNNING", "LOST", "RETRY_WAIT", "QUEUED",
                          "SCHEDULED"]
    # its credits survived the kill: still held for the retry, nothing billed for lost work
    hold = Hold.objects.get(job=job)
    assert hold.closed_at is None and hold.posted == 0 and hold.remaining == hold.amount > 0
    assert_ledger_consistent()


def test_a_job_on_a_killed_node_resumes_elsewhere_from_its_last_copied_checkpoint(
        alice, own_disks):
    """Each node has a work root of its own, as nodes with local disks do: what the killed
    node copied while the job ran is what the next node resumes from, and what was billed."""
    group = own_disks
    roots = _own_roots(group, "doomed", "spare")
    doomed, spare = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("doomed", "spare"))
    doomed_proc = group.node(doomed, 2, GPUSCHED_WORK_ROOT=roots["doomed"])
    wait_for(lambda: Node.objects.filter(name=doomed).exists(), 60, "the first node")
    group.scheduler()
    _paying(alice)
    job = make_job(alice, gpus=2, run_seconds=30, progress_interval=0.25, checkpoint_every=1)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == "RUNNING", 60, "the job to run")
    first = Attempt.objects.get(job=job)
    wait_for(lambda: _kept_s(first) >= 9, 60, "a copied checkpoint 9 s into the run")
    group.kill(doomed_proc)
    kept = _kept_s(first)
    [copy] = StoredCheckpoint.objects.filter(job=job)
    assert copy.attempt_id == first.pk
    group.node(spare, 2, GPUSCHED_WORK_ROOT=roots["spare"])
    wait_for(lambda: Attempt.objects.filter(job=job).count() == 2, 60, "a second attempt")
    second = Attempt.objects.filter(job=job).latest("id")
    assert second.node.name == spare
    wait_for(lambda: Attempt.objects.get(pk=second.pk).progress > 0, 30, "a heartbeat")
    # from the copy, not from 0: linked 9 s in, less the binary's start and the second
    # between its checkpoints, it holds over 6 s of the 30
    assert Attempt.objects.get(pk=second.pk).progress >= 6 / 30
    first.refresh_from_db()
    assert first.outcome == Attempt.Outcome.LOST
    assert _paid(first) == cost(first.credits_per_hour, kept) > 0  # the kept work, no more
    wait_for(lambda: Job.objects.get(pk=job.pk).state == "SUCCEEDED", 90, "the job to end")
    assert_ledger_consistent()


def test_a_gang_that_loses_a_node_resumes_from_the_last_step_every_node_copied(
        alice, own_disks):
    group = own_disks
    tag = uuid.uuid4().hex[:6]
    names = [f"g{i}-{tag}" for i in range(3)]
    roots = _own_roots(group, *names)
    workers = {n: group.node(n, 2, island="r1", GPUSCHED_WORK_ROOT=roots[n])
               for n in names[:2]}
    wait_for(lambda: Node.objects.filter(name__in=names).count() == 2, 60, "the nodes")
    group.scheduler()
    _paying(alice)
    job = make_job(alice, gpus=4, run_seconds=30, progress_interval=0.25, checkpoint_every=1)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == "RUNNING", 60, "the gang to run")
    first = Attempt.objects.get(job=job)
    wait_for(lambda: _kept_s(first) >= 9, 60, "a step both nodes copied, 9 s in")
    group.kill(workers[AttemptRank.objects.get(attempt=first).node.name])
    wait_for(lambda: Attempt.objects.get(pk=first.pk).outcome == "LOST", 30, "the loss")
    kept = _kept_s(first)
    cut = resume_copies(job.pk, nodes=2)
    assert sorted(cut) == [0, 1] and len(set(StoredCheckpoint.objects.filter(
        name__in=cut.values()).values_list("step", flat=True))) == 1
    group.node(names[2], 2, island="r1", GPUSCHED_WORK_ROOT=roots[names[2]])
    wait_for(lambda: Attempt.objects.filter(job=job).count() == 2, 60, "a second attempt")
    second = Attempt.objects.filter(job=job).latest("id")
    wait_for(lambda: Attempt.objects.get(pk=second.pk).progress > 0, 30, "a heartbeat")
    # both nodes resumed from that step, over 6 s of the 30 in (as for one node, above)
    wait_for(lambda: all(f"attempt {second.pk} resumes from {name}" in _said(group)
                         for name in cut.values()), 30, "both nodes to resume")
    assert Attempt.objects.get(pk=second.pk).progress >= 6 / 30
    assert _paid(first) == cost(first.credits_per_hour, kept) > 0  # the kept work, no more
    wait_for(lambda: Job.objects.get(pk=job.pk).state == "SUCCEEDED", 90, "the job to end")
    assert_ledger_consistent()
