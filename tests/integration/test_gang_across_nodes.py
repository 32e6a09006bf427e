"""A gang larger than a node runs as one attempt on nodes of one island: rank 0 on the
attempt's node, a fenced AttemptRank on each other. All its GPUs are bound at once, a rank
that fails or goes silent ends the whole attempt, and every end frees every node."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from jobs.models import Attempt, AttemptRank, GpuBinding, Job
from jobs.scheduler.nominations import start_nominees
from jobs.scheduler.snapshot import load_snapshot
from jobs.scheduler.tick import scheduler_tick_run
from jobs.scheduler.usage import fold_ended_attempts, load_usage
from jobs.services.cancellation import job_cancel
from tests.support.factories import make_job, make_node
from workers.models import Node
from workers.services.attempts import (
    AttemptResult,
    StaleAttempt,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)
from workers.services.ranks import rank_finish, rank_heartbeat, rank_start
from workers.services.reaper import reap_expired_attempts

pytestmark = pytest.mark.django_db(transaction=True)

FAILED = AttemptResult("FAILED", 3, "Traceback: boom", None, "exit_3")
OK = AttemptResult("SUCCEEDED", 0, "", None, "")


@pytest.fixture
def gang(alice) -> Attempt:
    """An 8-GPU job placed on two 4-GPU nodes of island r1."""
    make_node("n1", gpus=4, island="r1")
    make_node("n2", gpus=4, island="r1")
    job = make_job(alice, gpus=8)
    assert scheduler_tick_run().applied.placed == 1
    return Attempt.objects.get(job=job)


def _live_bindings() -> set[tuple[str, int]]:
    return set(GpuBinding.objects.filter(released_at__isnull=True).values_list(
        "gpu__node__name", "gpu__index"))


def test_a_gang_larger_than_a_node_is_placed_across_its_island(gang):
    rank = AttemptRank.objects.get(attempt=gang)
    assert (gang.node.name, gang.gpu_indices) == ("n1", [0, 1, 2, 3])
    assert (rank.rank, rank.node.name, rank.gpu_indices) == (1, "n2", [0, 1, 2, 3])
    assert _live_bindings() == {(n, i) for n in ("n1", "n2") for i in range(4)}
    assert "n1 GPUs [0, 1, 2, 3]; n2 GPUs [0, 1, 2, 3]" in gang.job.events.last().reason
    # the next round sees both nodes' GPUs as the gang's
    (running,) = load_snapshot(timezone.now()).running
    assert sorted((a.node, a.gpus) for a in running.allocations) == [
        ("n1", (0, 1, 2, 3)), ("n2", (0, 1, 2, 3))]


def test_nodes_in_different_islands_do_not_share_a_gang(alice):
    make_node("n1", gpus=4, island="r1")
    make_node("n2", gpus=4, island="r2")
    job = make_job(alice, gpus=8)
    scheduler_tick_run()
    job.refresh_from_db()
    assert job.state == "QUEUED" and job.pending_code == "no_fit"


def test_each_node_gets_its_place_in_the_gang(gang):
    Node.objects.filter(name="n1").update(address="n1.rack1.example")
    leader = attempt_start(attempt_id=gang.pk, token=gang.token)
    other = rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    assert (leader.node_rank, leader.node, leader.nodes) == (0, "n1", ("n1", "n2"))
    assert (other.node_rank, other.node, other.nodes) == (1, "n2", ("n1", "n2"))
    # rank 0's limit is the gang's: the others stop a grace later unless its end stops them
    grace = round(settings.GPUSCHED_KILL_GRACE_S)
    assert (leader.time_limit_s, other.time_limit_s) == (3600, 3600 + grace)
    port = settings.GPUSCHED_RENDEZVOUS_PORT  # rank 0 holds n1's GPUs from index 0
    assert leader.rendezvous == other.rendezvous == ("n1.rack1.example", port)
    assert other.gpu_uuids == tuple(
        Node.objects.get(name="n2").gpus.order_by("index").values_list("uuid", flat=True))


def test_two_gangs_meeting_on_one_node_get_ports_of_their_own(alice):
    from jobs import policy as P
    from jobs.scheduler.apply import place

    for name in ("n1", "n2"):
        make_node(name, gpus=4, island="r1")
    halves = [(0, 1), (2, 3)]
    gangs = [place(P.Placement(make_job(alice, gpus=4).pk,
                               (P.Allocation("n1", half), P.Allocation("n2", half))),
                   timezone.now()) for half in halves]
    meet = [attempt_start(attempt_id=a.pk, token=a.token).rendezvous for a in gangs]
    port = settings.GPUSCHED_RENDEZVOUS_PORT
    assert meet == [("n1", port), ("n1", port + 2)]  # rank 0 of both on n1


def test_a_rank_is_fenced_like_its_attempt(gang):
    with pytest.raises(StaleAttempt):
        rank_start(attempt_id=gang.pk, token=gang.token - 1, rank=1)
    with pytest.raises(StaleAttempt):
        rank_start(attempt_id=gang.pk, token=gang.token, rank=2)  # no such rank
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    with pytest.raises(StaleAttempt):  # a duplicate delivery
        rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    assert rank_heartbeat(attempt_id=gang.pk, token=gang.token + 1, rank=1).action == "stale"
    with pytest.raises(StaleAttempt):
        rank_finish(attempt_id=gang.pk, token=gang.token + 1, rank=1, result=FAILED)
    assert Job.objects.get(pk=gang.job_id).state == "SCHEDULED"


def test_a_rank_hears_the_attempts_verdict(gang):
    attempt_start(attempt_id=gang.pk, token=gang.token)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    assert rank_heartbeat(attempt_id=gang.pk, token=gang.token, rank=1).action == "continue"
    Attempt.objects.filter(pk=gang.pk).update(
        stop_requested="preempt", stop_deadline=timezone.now() + timedelta(seconds=30))
    verdict = rank_heartbeat(attempt_id=gang.pk, token=gang.token, rank=1)
    assert verdict.action == "preempt" and 25 < verdict.deadline_s <= 30


def test_a_failing_rank_ends_the_gang_and_frees_every_node(gang):
    attempt_start(attempt_id=gang.pk, token=gang.token)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    assert rank_finish(attempt_id=gang.pk, token=gang.token, rank=1, result=FAILED) == "FAILED"
    gang.refresh_from_db()
    job = gang.job
    assert gang.outcome == "FAILED" and job.state == "RETRY_WAIT"  # a crash is tried again
    assert job.events.get(to_state="RETRY_WAIT").data["error_code"] == "exit_3"
    assert "[rank 1 of the gang, on n2, ended it]" in gang.stderr_tail
    assert not _live_bindings()
    # rank 0, still running, is told to stop and can report nothing
    assert attempt_heartbeat(attempt_id=gang.pk, token=gang.token).action == "stale"
    with pytest.raises(StaleAttempt):
        attempt_finish(attempt_id=gang.pk, token=gang.token, result=OK)


def test_a_rank_done_first_waits_for_rank_0_whose_end_ends_the_others(alice):
    for name in ("n1", "n2", "n3"):
        make_node(name, gpus=2, island="r1")
    job = make_job(alice, gpus=6)
    scheduler_tick_run()
    gang = Attempt.objects.get(job=job)
    attempt_start(attempt_id=gang.pk, token=gang.token)
    for rank in (1, 2):
        rank_start(attempt_id=gang.pk, token=gang.token, rank=rank)
    rank_finish(attempt_id=gang.pk, token=gang.token, rank=1, result=OK)
    assert Job.objects.get(pk=job.pk).state == "RUNNING" and len(_live_bindings()) == 6
    attempt_finish(attempt_id=gang.pk, token=gang.token, result=OK)
    assert Job.objects.get(pk=job.pk).state == "SUCCEEDED" and not _live_bindings()
    ranks = dict(AttemptRank.objects.filter(attempt=gang).values_list("rank", "outcome"))
    assert ranks == {1: "SUCCEEDED", 2: ""}  # rank 2 was still running: ended, unreported
    assert not AttemptRank.objects.filter(ended_at__isnull=True).exists()
    assert rank_heartbeat(attempt_id=gang.pk, token=gang.token, rank=2).action == "stale"


def test_a_silent_rank_loses_the_whole_attempt(gang):
    attempt_start(attempt_id=gang.pk, token=gang.token)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    now = timezone.now()
    assert reap_expired_attempts(now=now) == 0
    # rank 0 keeps renewing; rank 1's node went quiet
    attempt_heartbeat(attempt_id=gang.pk, token=gang.token)
    AttemptRank.objects.filter(attempt=gang).update(lease_expires_at=now - timedelta(seconds=1))
    assert reap_expired_attempts(now=now) == 1
    gang.refresh_from_db()
    assert gang.outcome == "LOST" and gang.job.state == "RETRY_WAIT" and not _live_bindings()
    assert attempt_heartbeat(attempt_id=gang.pk, token=gang.token).action == "stale"


def test_a_renewed_rank_is_not_reaped(gang):
    """The reap is conditional on a lease still being out: a heartbeat in between wins."""
    attempt_start(attempt_id=gang.pk, token=gang.token)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    past = timezone.now() + timedelta(hours=-1)
    AttemptRank.objects.filter(attempt=gang).update(lease_expires_at=past)
    rank_heartbeat(attempt_id=gang.pk, token=gang.token, rank=1)
    assert reap_expired_attempts(now=timezone.now()) == 0
    assert Job.objects.get(pk=gang.job_id).state == "RUNNING"


def test_cancelling_a_gang_not_yet_started_frees_every_node(gang):
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)  # rank 1 was quicker
    job_cancel(job=gang.job)
    assert Job.objects.get(pk=gang.job_id).state == "CANCELLED" and not _live_bindings()
    assert rank_heartbeat(attempt_id=gang.pk, token=gang.token, rank=1).action == "stale"


def test_a_gang_pays_and_counts_for_the_gpus_of_every_node(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=100)
    credits_grant(organization=alice, amount=100_000)
    make_node("n1", gpus=4, island="r1")
    make_node("n2", gpus=4, island="r1")
    job = make_job(alice, gpus=8)
    scheduler_tick_run()
    gang = Attempt.objects.get(job=job)
    attempt_start(attempt_id=gang.pk, token=gang.token)
    started = timezone.now() - timedelta(seconds=100)
    Attempt.objects.filter(pk=gang.pk).update(started_at=started)
    assert Attempt.objects.get(pk=gang.pk).credits_per_hour == 800
    now = timezone.now()
    assert load_usage(now, 3600).org["alice"] == pytest.approx(800, rel=0.01)
    assert load_snapshot(now).usage["alice"] == pytest.approx(800, rel=0.01)
    attempt_finish(attempt_id=gang.pk, token=gang.token, result=OK)
    ended = Attempt.objects.get(pk=gang.pk).ended_at
    assert fold_ended_attempts(ended, 1e9) == 1
    expected = 8 * (ended - started).total_seconds()
    assert load_usage(ended, 1e9).org["alice"] == pytest.approx(expected, rel=0.001)


def test_gpus_promised_across_nodes_start_the_gang_once_free(alice):
    make_node("n1", gpus=2, island="r1")
    make_node("n2", gpus=2, island="r1")
    job = make_job(alice, gpus=4)
    Job.objects.filter(pk=job.pk).update(
        nominated_node=Node.objects.get(name="n1"), nominated_gpus=[0, 1],
        nominated_peers=[{"node": "n2", "gpus": [0, 1]}])
    assert start_nominees(timezone.now()).started == 1
    gang = Attempt.objects.get(job=job)
    assert AttemptRank.objects.get(attempt=gang).node.name == "n2"
    assert len(_live_bindings()) == 4


def test_a_promise_on_a_node_that_left_is_dropped(alice):
    make_node("n1", gpus=2, island="r1")
    make_node("n2", gpus=2, island="r1")
    job = make_job(alice, gpus=4)
    Node.objects.filter(name="n2").update(state="CORDONED")
    Job.objects.filter(pk=job.pk).update(
        nominated_node=Node.objects.get(name="n1"), nominated_gpus=[0, 1],
        nominated_peers=[{"node": "n2", "gpus": [0, 1]}])
    assert start_nominees(timezone.now()).dropped == 1
    job.refresh_from_db()
    assert (job.nominated_node, job.nominated_gpus, job.nominated_peers) == (None, [], [])
    assert not Attempt.objects.exists()


def test_evacuating_a_node_stops_the_gangs_that_run_a_rank_there(gang):
    from workers.services.fleet import node_drain

    attempt_start(attempt_id=gang.pk, token=gang.token)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    assert node_drain(Node.objects.get(name="n2"), evacuate=True) == 1
    assert Job.objects.get(pk=gang.job_id).state == "PREEMPTING"
    assert rank_heartbeat(attempt_id=gang.pk, token=gang.token, rank=1).action == "preempt"


@pytest.mark.parametrize("state,kept", [("QUEUED", True), ("SUCCEEDED", False)])
def test_a_fenced_rank_keeps_its_checkpoint_only_while_the_job_may_resume(
        gang, tmp_path, state, kept):
    from workers.agent.command import AttemptPaths
    from workers.agent.runner import _discard

    claim = rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    paths = AttemptPaths.under(tmp_path, claim.job_id, claim.attempt_id, ".y4m", rank=1)
    paths.create({})
    Job.objects.filter(pk=gang.job_id).update(state=state)
    assert _discard(claim, paths) == "stale"
    assert not paths.work_dir.exists() and paths.checkpoint_dir.exists() is kept


def test_a_rank_dying_while_its_gang_stops_leaves_the_end_to_rank_0(gang):
    """Its peers stopping can break a rank's collective calls: a preemption stays one."""
    from jobs.services.requeue import attempt_stop_and_requeue

    attempt_start(attempt_id=gang.pk, token=gang.token)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    assert attempt_stop_and_requeue(gang, reason="test", grace_s=30)
    rank_finish(attempt_id=gang.pk, token=gang.token, rank=1, result=FAILED)
    assert Attempt.objects.get(pk=gang.pk).ended_at is None
    attempt_finish(attempt_id=gang.pk, token=gang.token,
                   result=AttemptResult("PREEMPTED", 75, "", None, ""))
    assert Job.objects.get(pk=gang.job_id).state == "QUEUED" and not _live_bindings()


def test_a_rank_out_of_time_ends_the_gang(gang):
    attempt_start(attempt_id=gang.pk, token=gang.token)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    rank_finish(attempt_id=gang.pk, token=gang.token, rank=1,
                result=AttemptResult("TIMED_OUT", -15, "", None, "time_limit"))
    job = Job.objects.get(pk=gang.job_id)
    assert (job.state, job.error_code) == ("TIMED_OUT", "time_limit") and not _live_bindings()


def test_rank_0_reports_once_its_other_ranks_have_ended_or_their_time_is_over(gang):
    import threading
    import time

    from workers.agent.runner import Supervision, _await_ranks

    claim = attempt_start(attempt_id=gang.pk, token=gang.token)
    rank_start(attempt_id=gang.pk, token=gang.token, rank=1)
    started = time.monotonic()
    _await_ranks(claim, Supervision(stop="preempt", kill_at=started + 0.5))
    assert 0.5 <= time.monotonic() - started < 5  # rank 1 still runs: waited its time out
    def rank_1_stops() -> None:
        try:
            rank_finish(attempt_id=gang.pk, token=gang.token, rank=1,
                        result=AttemptResult("PREEMPTED", 75, "", None, ""))
        finally:
            connection.close()  # this thread's own

    stopper = threading.Timer(0.5, rank_1_stops)
    stopper.start()
    started = time.monotonic()
    _await_ranks(claim, Supervision(stop="preempt", kill_at=started + 30))
    stopper.join()
    assert 0.4 <= time.monotonic() - started < 5  # and no longer than it ran


def test_a_gang_is_not_bound_across_islands_the_round_did_not_see(alice):
    """A node registered again meanwhile with another island: the bind refuses the gang."""
    from jobs import policy as P
    from jobs.scheduler.apply import place

    make_node("n1", gpus=2, island="r1")
    make_node("n2", gpus=2, island="r2")
    job = make_job(alice, gpus=4)
    placement = P.Placement(job.pk, (P.Allocation("n1", (0, 1)), P.Allocation("n2", (0, 1))))
    with pytest.raises(ValueError, match="not nodes of one island"):
        place(placement, timezone.now())
