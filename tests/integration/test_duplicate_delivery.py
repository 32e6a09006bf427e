"""The broker may deliver a run message twice; the job still runs once."""

import uuid

import pytest

from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.processes import wait_for
from workers.models import Node
from workers.queues import node_queue
from workers.tasks import run_attempt

pytestmark = pytest.mark.django_db(transaction=True)


def _node_up(processes, gpus=2) -> str:
    name = f"dup-{uuid.uuid4().hex[:6]}"
    processes.node(name, gpus)
    wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "node registration")
    return name


def test_the_same_message_delivered_twice_runs_the_job_once(alice, processes):
    purge_broker_and_cache()
    name = _node_up(processes)
    job = make_job(alice, gpus=1, run_seconds=1.5, progress_interval=0.25)
    assert scheduler_tick_run().applied.placed == 1
    attempt = Attempt.objects.get(job=job)
    # the tick already published once; the same message again, same task id
    message_id = str(uuid.uuid4())
    for _ in range(2):
        run_attempt.apply_async(args=[attempt.pk, attempt.token], queue=node_queue(name),
                                task_id=message_id)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == "SUCCEEDED", 60, "job to succeed")
    job.refresh_from_db()
    assert job.attempts.count() == 1
    assert job.events.filter(to_state="RUNNING").count() == 1
    assert [e.to_state for e in job.events.all()] == ["QUEUED", "SCHEDULED", "RUNNING",
                                                      "SUCCEEDED"]
    wait_for(lambda: "refused" in processes.logs(), 30, "the duplicates to be refused")


def test_a_stale_token_is_refused_by_the_worker(alice, processes):
    purge_broker_and_cache()
    name = _node_up(processes)
    job = make_job(alice, gpus=1, run_seconds=1, progress_interval=0.25)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == "SUCCEEDED", 60, "job to succeed")
    run_attempt.apply_async(args=[attempt.pk, attempt.token - 1], queue=node_queue(name))
    wait_for(lambda: processes.logs().count("refused") >= 1, 30, "the stale token refused")
    assert Job.objects.get(pk=job.pk).events.filter(to_state="RUNNING").count() == 1
