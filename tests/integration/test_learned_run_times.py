"""Run times learned from history: each whole successful run is learned once, by project
and GPU count, and jobs without the client's estimate are planned by them. Racing folds:
tests/integration/test_usage_accounts.py."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.fencing import next_token
from jobs.models import Attempt, Job, Project, RunTimeStat
from jobs.scheduler.queue_cache import QueueCache
from jobs.scheduler.runtimes import FLEET, load_run_times
from jobs.scheduler.snapshot import load_snapshot
from jobs.scheduler.tick import scheduler_tick_run
from jobs.scheduler.usage import fold_ended_attempts
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_job, make_node
from workers.models import Node, NodeState
from workers.services.attempts import attempt_start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_cache")]

HOUR = 3600.0



def _ran(job: Job, seconds: float, outcome: str = "SUCCEEDED") -> Attempt:
    """An ended attempt of `job` as history has it, on a node that takes no more work."""
    node = make_node(f"h{Attempt.objects.count()}", gpus=job.gpus)
    Node.objects.filter(pk=node.pk).update(state=NodeState.DOWN)
    Job.objects.filter(pk=job.pk).update(state="SUCCEEDED" if outcome == "SUCCEEDED"
                                         else "FAILED")
    ended = timezone.now()
    return Attempt.objects.create(job=job, node=node, gpu_indices=list(range(job.gpus)),
                                  token=next_token(), status="ENDED", outcome=outcome,
                                  started_at=ended - timedelta(seconds=seconds),
                                  ended_at=ended)


def _history(org, gpus: int, *seconds: float) -> None:
    for value in seconds:
        _ran(make_job(org, gpus=gpus), value)


def _lognormal_mean(*seconds: float) -> float:
    logs = [math.log(s) for s in seconds]
    mean = sum(logs) / len(logs)
    return math.exp(mean + sum((x - mean) ** 2 for x in logs) / len(logs) / 2)


def test_only_whole_successful_runs_are_learned_once_each(alice):
    _history(alice, 1, 60, 80, 100)
    _history(alice, 2, 500)
    _ran(make_job(alice), 7, outcome="FAILED")
    resumed = make_job(alice)  # preempted after 30 s, then resumed to success in 40 s
    _ran(resumed, 30, outcome="PREEMPTED")
    _ran(resumed, 40)
    assert fold_ended_attempts(timezone.now(), 6 * HOUR) == 7
    assert fold_ended_attempts(timezone.now(), 6 * HOUR) == 0
    runs = {(s.project_id, s.gpus): s.runs for s in RunTimeStat.objects.all()}
    project = alice.projects.get().pk
    assert runs == {(project, 1): 3, (project, 2): 1, (None, 1): 3, (None, 2): 1}
    learned = pytest.approx(_lognormal_mean(60, 80, 100))
    assert load_run_times() == {(project, 1): learned, (FLEET, 1): learned}


def test_jobs_without_an_estimate_are_planned_by_their_projects_run_time(alice):
    _history(alice, 1, 60, 80, 100)
    fold_ended_attempts(timezone.now(), 6 * HOUR)
    learned = _lognormal_mean(60, 80, 100)
    make_node("n1", gpus=1)
    running = make_job(alice)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=running)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    attempt.refresh_from_db()
    plain, told = make_job(alice), make_job(alice, expected_duration_s=500)
    short_limit = make_job(alice)
    Job.objects.filter(pk=short_limit.pk).update(time_limit_s=60)
    other_size = make_job(alice, gpus=2)
    Project.objects.create(organization=alice, name="new")
    new_project = job_submit(organization=alice, spec=JobSpec(prompt="a cat", project="new"))

    snapshot = load_snapshot(timezone.now())
    expected = {q.job_id: q.expected_duration_s for q in snapshot.queued}
    assert expected[told.pk] == 500  # the client's own estimate stands
    assert expected[short_limit.pk] == 60  # never past the limit
    assert expected[other_size.pk] is None  # no history at 2 GPUs: the limit stands in
    assert expected[plain.pk] == pytest.approx(learned)
    assert expected[new_project.pk] == pytest.approx(learned)  # no history: the fleet's
    (run,) = snapshot.running
    assert run.expected_end == pytest.approx(attempt.started_at.timestamp() + learned)


def test_a_cached_queue_follows_the_run_times_as_they_move(alice):
    jobs = [make_job(alice, gpus=g) for g in (1, 1, 2)]
    project = alice.projects.get().pk
    cache = QueueCache(versioned=True)
    for run_times in ({}, {(project, 1): 90.0}, {(project, 1): 45.0, (project, 2): 7200.0},
                      {(FLEET, 1): 50.0, (project, 2): 30.0}):
        loaded = {q.job_id: q.expected_duration_s for q in cache.load(0.0, run_times)}
        fresh = {q.job_id: q.expected_duration_s
                 for q in QueueCache(versioned=False).load(0.0, run_times)}
        assert loaded == fresh
        assert cache.last_read == (3 if not run_times else 0)  # no row read again
    assert [loaded[j.pk] for j in jobs] == [50.0, 50.0, 30.0]


def test_a_reservation_is_planned_by_the_running_jobs_learned_end(alice):
    """A gang waits for a node whose running job gives no estimate: with its project's
    history, the start it is shown is that job's learned end, not its hour-long limit."""
    _history(alice, 4, 110, 120, 130)
    make_node("n1", gpus=4)
    first = make_job(alice, gpus=4)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=first)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    waiting = make_job(alice, gpus=4)
    scheduler_tick_run()  # folds the history, then plans the gang
    waiting.refresh_from_db()
    attempt.refresh_from_db()
    assert waiting.state == "QUEUED" and waiting.estimated_start is not None
    in_s = (waiting.estimated_start - attempt.started_at).total_seconds()
    assert in_s == pytest.approx(_lognormal_mean(110, 120, 130), abs=2)
    assert first.time_limit_s >= 3600


def test_operators_may_plan_by_time_limits_instead(alice, settings):
    _history(alice, 1, 60, 80, 100)
    fold_ended_attempts(timezone.now(), 6 * HOUR)
    job = make_job(alice)
    settings.GPUSCHED_LEARNED_RUN_TIMES = False
    (queued,) = load_snapshot(timezone.now()).queued
    assert (queued.job_id, queued.expected_duration_s) == (job.pk, None)
    settings.GPUSCHED_LEARNED_RUN_TIMES = True
    (queued,) = load_snapshot(timezone.now()).queued
    assert queued.expected_duration_s == pytest.approx(_lognormal_mean(60, 80, 100))
