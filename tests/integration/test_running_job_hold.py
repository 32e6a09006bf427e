"""A running job that checkpoints is held as Kueue suspends a workload: stopped at a
checkpoint, as a preemption stops it, then HELD, reserving no credits, and released it
resumes from there; one placed whose node has not started it is held at once. Attacked: a
job that would start over, one being cancelled, a hold racing its node's start, a hold on a
job the scheduler is preempting, a release before it stopped, a job that finishes, fails or
loses its node as it stops, an operator's hold, and holds racing the attempt's end and the
rounds (invariant: a job carries a hold only while HELD or stopping to be held, and one held
as it ran never queues before its release)."""

from datetime import timedelta
from functools import partial

import pytest
from django.db import IntegrityError
from django.utils import timezone

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from credits.services.holds import job_credits
from jobs.models import Attempt, GpuBinding, Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.errors import Conflict
from jobs.services.job_hold import OPERATOR, job_hold, job_release
from jobs.services.release import release_attempt
from jobs.services.requeue import job_requeue
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_node, start_placed
from tests.support.ledger import assert_ledger_consistent, wallet_of
from tests.support.race import hold_and_release_each, race
from workers.agent.outcome import EXIT_CHECKPOINTED
from workers.services.attempts import (
    AttemptResult,
    StaleAttempt,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)
from workers.services.reaper import reap_expired_attempts, release_due_retries

pytestmark = pytest.mark.django_db(transaction=True)
STOPPED = AttemptResult("PREEMPTED", EXIT_CHECKPOINTED)


def _job(pk: int) -> Job:
    return Job.objects.get(pk=pk)


def _running(org, checkpointable: bool = True, limit: int = 600) -> tuple[Job, Attempt]:
    job = job_submit(organization=org, spec=JobSpec(prompt="a long training run",
                                                    checkpointable=checkpointable,
                                                    time_limit_s=limit))
    return job, start_placed(job)


def _end(attempt: Attempt, result: AttemptResult = STOPPED) -> Job:
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=result)


def _moves(job_id: int) -> list[tuple[str, str]]:
    return [(e.from_state, e.to_state) for e in _job(job_id).events.order_by("pk")]


def test_a_running_job_stops_at_a_checkpoint_is_held_and_resumes_once_released(api, alice):
    make_node(gpus=1)
    job, attempt = _running(alice)
    asked = api.post(f"/api/v1/jobs/{job.pk}/hold")
    assert asked.status_code == 202
    assert (asked.json()["state"], asked.json()["hold"]) == ("PREEMPTING", "client")
    assert asked.json()["stopping"]["for"] == "hold" and asked.json()["stopping"]["deadline"]
    # its binary is told to stop as for a preemption: at a checkpoint, to resume
    verdict = attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token)
    assert verdict.action == "preempt" and verdict.deadline_s > 0
    scheduler_tick_run()
    assert _job(job.pk).state == "PREEMPTING"  # no round takes it from its stop
    held = _end(attempt)
    assert (held.state, held.hold, held.pending_code) == ("HELD", "client", "hold")
    assert held.preemptions == 0  # a hold is not the policy's: its cap is untouched
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    scheduler_tick_run()
    assert _job(job.pk).state == "HELD"
    released = api.post(f"/api/v1/jobs/{job.pk}/release")
    assert (released.status_code, released.json()["state"]) == (200, "QUEUED")
    assert released.json()["stopping"] is None
    scheduler_tick_run()
    assert _job(job.pk).state == "SCHEDULED"
    assert _moves(job.pk)[1:] == [
        ("QUEUED", "SCHEDULED"), ("SCHEDULED", "RUNNING"), ("RUNNING", "PREEMPTING"),
        ("PREEMPTING", "HELD"), ("HELD", "QUEUED"), ("QUEUED", "SCHEDULED")]


def test_a_job_that_would_start_over_or_is_being_cancelled_is_not_held(api, alice):
    make_node(gpus=4)
    plain, plain_attempt = _running(alice, checkpointable=False)
    refused = api.post(f"/api/v1/jobs/{plain.pk}/hold")
    assert (refused.status_code, refused.json()["error"]["code"]) == (409,
                                                                      "not_checkpointable")
    assert Attempt.objects.get(pk=plain_attempt.pk).stop_requested == ""
    cancelled, _ = _running(alice)
    api.post(f"/api/v1/jobs/{cancelled.pk}/cancel")
    answer = api.post(f"/api/v1/jobs/{cancelled.pk}/hold")
    assert answer.json()["error"]["code"] == "job_cancelling"
    assert [_job(j.pk).hold for j in (plain, cancelled)] == ["", ""]


@pytest.mark.parametrize("checkpointable", [False, True])
def test_a_job_its_node_has_not_started_is_held_at_once_and_never_starts(api, alice,
                                                                         checkpointable):
    make_node(gpus=2)
    credits_grant(organization=alice, amount=10_000, memo="top-up")
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    job = job_submit(organization=alice, spec=JobSpec(prompt="x", gpus=2, time_limit_s=300,
                                                      checkpointable=checkpointable))
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    answer = api.post(f"/api/v1/jobs/{job.pk}/hold")  # nothing ran: it loses nothing
    assert (answer.status_code, answer.json()["state"]) == (200, "HELD")
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    assert job_credits(_job(job.pk))["held"] == 0
    with pytest.raises(StaleAttempt):  # its node's late start is refused
        attempt_start(attempt_id=attempt.pk, token=attempt.token)
    scheduler_tick_run()
    assert _job(job.pk).state == "HELD"
    job_release(job=_job(job.pk))
    scheduler_tick_run()
    assert _job(job.pk).state == "SCHEDULED" and job_credits(_job(job.pk))["held"] == 600
    assert _moves(job.pk)[1:] == [("QUEUED", "SCHEDULED"), ("SCHEDULED", "HELD"),
                                  ("HELD", "QUEUED"), ("QUEUED", "SCHEDULED")]
    assert_ledger_consistent()


def test_a_hold_racing_its_nodes_start_either_holds_it_unstarted_or_runs_it(alice):
    make_node(gpus=1)
    for _ in range(6):
        job = job_submit(organization=alice, spec=JobSpec(prompt="x", checkpointable=False))
        scheduler_tick_run()
        attempt = Attempt.objects.get(job=job)
        refused: list[str] = []

        def hold(job=job, refused=refused):
            try:
                job_hold(job=_job(job.pk))
            except Conflict as exc:
                refused.append(exc.code)

        start = partial(attempt_start, attempt_id=attempt.pk, token=attempt.token)
        assert race(hold, start) == []  # the loser's StaleAttempt is the race's to swallow
        job, attempt = _job(job.pk), Attempt.objects.get(pk=attempt.pk)
        if job.state == "HELD":  # held first: the binary never ran, its GPUs are free
            assert attempt.started_at is None and attempt.ended_at is not None
            assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
        else:  # started first: it would start over, so it runs on, not held
            assert (job.state, job.hold, refused) == ("RUNNING", "", ["not_checkpointable"])
            assert attempt.started_at is not None and attempt.ended_at is None
        if attempt.ended_at is None:
            _end(attempt, AttemptResult("SUCCEEDED", 0))
        else:
            job_cancel(job=job)


def test_a_job_the_scheduler_preempts_is_held_once_it_stopped(alice):
    make_node(gpus=1)
    job, attempt = _running(alice)
    job_requeue(job=_job(job.pk), by="op")  # stopping for the queue, as a preemption's victim does
    assert job_hold(job=_job(job.pk)).hold == "client"
    held = _end(attempt)
    assert (held.state, held.hold, held.preemptions) == ("HELD", "client", 1)
    assert _moves(job.pk)[-2:] == [("PREEMPTING", "PREEMPTING"), ("PREEMPTING", "HELD")]


def test_released_before_it_stopped_it_queues_without_a_preemption(alice):
    make_node(gpus=1)
    job, attempt = _running(alice)
    job_hold(job=job)
    assert job_release(job=_job(job.pk)).hold == ""
    queued = _end(attempt)
    assert (queued.state, queued.preemptions) == ("QUEUED", 0)
    assert queued.pending_reason == "queued again after it stopped"


def test_a_job_that_finishes_as_it_stops_ends_and_no_one_holds_it(alice):
    make_node(gpus=1)
    job, attempt = _running(alice)
    job_hold(job=job)
    done = _end(attempt, AttemptResult("SUCCEEDED", 0))
    assert (done.state, _job(job.pk).hold) == ("SUCCEEDED", "")


def test_a_job_that_loses_its_node_or_fails_as_it_stops_waits_held_not_for_a_retry(alice):
    make_node("n1", gpus=1)
    make_node("n2", gpus=1)
    lost, lost_attempt = _running(alice)
    failed, failed_attempt = _running(alice)
    job_hold(job=lost, by=OPERATOR, note="quota review")
    job_hold(job=failed)
    Attempt.objects.filter(pk=lost_attempt.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert reap_expired_attempts(now=timezone.now()) == 1
    _end(failed_attempt, AttemptResult("FAILED", 1, error_code="exit_1"))
    assert release_due_retries(now=timezone.now() + timedelta(hours=1)) == 0
    lost, failed = _job(lost.pk), _job(failed.pk)
    assert (lost.state, lost.hold, lost.retries, lost.retry_at) == ("HELD", "operator", 1, None)
    assert lost.pending_reason == "held by an operator: quota review"
    assert ("LOST", "RETRY_WAIT") in _moves(lost.pk)  # the loss stays in its history
    assert (failed.state, failed.hold, failed.retries) == ("HELD", "client", 1)


def test_an_operators_hold_on_a_running_job_is_not_the_clients_to_release(api, alice):
    make_node(gpus=1)
    job, attempt = _running(alice)
    job_hold(job=job, by=OPERATOR, note="abuse report")
    refused = api.post(f"/api/v1/jobs/{job.pk}/release")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "held_by_operator"
    assert api.post(f"/api/v1/jobs/{job.pk}/hold").json()["hold"] == "operator"
    assert (_end(attempt).state, _job(job.pk).hold) == ("HELD", "operator")


def test_a_job_held_as_it_ran_gives_its_credits_back_and_keeps_what_it_spent(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=10_000)
    make_node(gpus=1)
    job, attempt = _running(alice)
    Attempt.objects.filter(pk=attempt.pk).update(started_at=timezone.now() - timedelta(
        seconds=120))
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    job_hold(job=_job(job.pk))
    _end(attempt)  # its checkpoint kept its 120 s: billed; the rest of its hold goes back
    spent = job_credits(_job(job.pk))
    assert spent["held"] == 0 and 120 <= spent["spent"] <= 125
    assert wallet_of(alice).available == 10_000 - spent["spent"]
    job_release(job=_job(job.pk))  # its most, less what it spent
    assert job_credits(_job(job.pk))["held"] == 600 - spent["spent"]
    assert_ledger_consistent()


def test_the_database_refuses_a_hold_on_a_job_neither_held_nor_stopping(alice):
    make_node(gpus=1)
    job, _ = _running(alice)
    with pytest.raises(IntegrityError):
        Job.objects.filter(pk=job.pk).update(hold="client")


def _queued_while_held(job_id: int) -> bool:
    """Whether the job went back to the queue from its stop while its last word was a hold."""
    held = False
    for event in _job(job_id).events.order_by("pk"):
        if "hold" in event.data:
            held = bool(event.data["hold"])
        if (event.from_state, event.to_state) == ("PREEMPTING", "QUEUED") and held:
            return True
    return False


def test_holds_releases_ends_and_rounds_racing_never_queue_a_held_job(alice):
    make_node("n1", gpus=2)
    for _ in range(3):
        pairs = [_running(alice) for _ in range(2)]
        flip = partial(hold_and_release_each, [job.pk for job, _ in pairs], refusals={
            "job_not_held", "held_by_operator", "busy", "job_finished"})
        ends = [partial(_end, attempt) for _, attempt in pairs]
        assert race(partial(flip, by="client"), partial(flip, by=OPERATOR),
                    scheduler_tick_run, *ends) == []
        for job, _ in pairs:
            job = _job(job.pk)
            assert job.state != "PREEMPTING" and not _queued_while_held(job.pk), job.state
            assert job.state == "HELD" or not job.hold
            _clear(job)


def _clear(job: Job) -> None:
    """Take a raced job out of the way of the next round's (its GPUs free, it ended)."""
    for attempt in Attempt.objects.filter(job=job, ended_at__isnull=True):
        Attempt.objects.filter(pk=attempt.pk).update(ended_at=timezone.now())
        release_attempt(attempt.pk, timezone.now())
    Job.objects.filter(pk=job.pk).update(state="CANCELLED", hold="")


def test_a_member_stops_and_holds_a_running_job_on_its_page(owner, alice):
    make_node(gpus=1)
    job, attempt = _running(alice)
    page = owner.get(f"/dashboard/jobs/{job.pk}").content.decode()
    assert "Stop it at a checkpoint and hold it" in page
    said = owner.post(f"/dashboard/jobs/{job.pk}/hold", follow=True).content.decode()
    assert "Stopping at a checkpoint" in said and "queue it again once it stopped" in said
    assert (_job(job.pk).state, _job(job.pk).hold) == ("PREEMPTING", "client")
    _end(attempt)
    assert "Release: queue it again</button>" in owner.get(
        f"/dashboard/jobs/{job.pk}").content.decode()
    plain, _ = _running(alice, checkpointable=False)
    assert "hold it" not in owner.get(f"/dashboard/jobs/{plain.pk}").content.decode()


def test_an_experiment_is_paused_by_its_label_running_jobs_at_a_checkpoint(api, alice):
    make_node(gpus=2)

    def labelled(checkpointable: bool) -> int:
        return api.post("/api/v1/jobs", {"prompt": "x", "labels": {"exp": "e1"},
                                         "checkpointable": checkpointable},
                        format="json").json()["id"]

    running, plain = labelled(True), labelled(False)
    scheduler_tick_run()
    for attempt in Attempt.objects.filter(job_id__in=(running, plain)):
        attempt_start(attempt_id=attempt.pk, token=attempt.token)  # as their node does
    waiting = labelled(True)
    answer = api.post("/api/v1/jobs/hold", {"label": ["exp:e1"]}, format="json").json()
    assert answer == {"held": [waiting], "stopping": [running], "left": 0}
    assert [_job(pk).state for pk in (running, plain, waiting)] == [
        "PREEMPTING", "RUNNING", "HELD"]
    again = api.post("/api/v1/jobs/hold", {"label": ["exp:e1"]}, format="json").json()
    assert again == {"held": [], "stopping": [], "left": 0}
    _end(Attempt.objects.get(job_id=running))
    released = api.post("/api/v1/jobs/release", {"label": ["exp:e1"]}, format="json").json()
    assert released["released"] == [running, waiting]
