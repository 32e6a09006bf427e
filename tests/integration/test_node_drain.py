"""Operators take a node out of service: a cordoned or draining node gets no new job; a drain
with evacuation stops its running jobs at a checkpoint and they resume on another node."""

import pytest
from django.contrib.auth.models import User

from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node
from workers.models import Node
from workers.services.attempts import (
    AttemptResult,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)
from workers.services.fleet import node_cordon, node_drain, node_return_to_service

pytestmark = pytest.mark.django_db(transaction=True)


def _run(job) -> Attempt:
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job, ended_at__isnull=True)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    return attempt


def test_a_cordoned_node_gets_nothing_new_until_it_returns(alice):
    node = make_node("n1", gpus=2)
    node_cordon(node)
    job = make_job(alice)
    scheduler_tick_run()
    assert Job.objects.get(pk=job.pk).state == "QUEUED"
    node_return_to_service(node)
    scheduler_tick_run()
    assert Job.objects.get(pk=job.pk).state == "SCHEDULED"


def test_a_plain_drain_lets_running_jobs_finish(alice):
    node = make_node("n1", gpus=2)
    running = _run(make_job(alice))
    assert node_drain(node) == 0
    assert attempt_heartbeat(attempt_id=running.pk, token=running.token).action == "continue"
    waiting = make_job(alice)
    scheduler_tick_run()
    assert Job.objects.get(pk=waiting.pk).state == "QUEUED"
    assert Node.objects.get(pk=node.pk).state == "DRAINING"


def test_an_evacuated_job_checkpoints_and_resumes_on_another_node(alice):
    n1 = make_node("n1", gpus=2)
    job = make_job(alice, checkpointable=True)
    first = _run(job)
    make_node("n2", gpus=2)
    assert node_drain(n1, evacuate=True, grace_s=30) == 1
    assert node_drain(n1, evacuate=True) == 0  # asked once
    verdict = attempt_heartbeat(attempt_id=first.pk, token=first.token)
    assert verdict.action == "preempt" and 0 < verdict.deadline_s <= 30
    assert Job.objects.get(pk=job.pk).state == "PREEMPTING"
    attempt_finish(attempt_id=first.pk, token=first.token, result=AttemptResult("PREEMPTED", 75))
    assert Job.objects.get(pk=job.pk).state == "QUEUED"
    scheduler_tick_run()
    second = Attempt.objects.get(job=job, ended_at__isnull=True)
    assert second.node.name == "n2"


def test_operators_drain_from_admin(alice, client):
    client.force_login(User.objects.create_superuser("olga", "o@example.com", "pw"))
    node = make_node("n1", gpus=1)
    attempt = _run(make_job(alice))
    answer = client.post("/admin/workers/node/", {
        "action": "drain_and_evacuate", "_selected_action": [node.pk]}, follow=True)
    assert "1 running job(s) asked to checkpoint" in answer.content.decode()
    assert Attempt.objects.get(pk=attempt.pk).stop_requested == "preempt"
    client.post("/admin/workers/node/", {"action": "return_to_service",
                                          "_selected_action": [node.pk]})
    assert Node.objects.get(pk=node.pk).state == "ACTIVE"


def test_an_operator_requeues_a_running_job_and_not_a_waiting_one(alice, client):
    from jobs.services.errors import Conflict
    from jobs.services.requeue import job_requeue

    make_node("n1", gpus=1)
    running = _run(make_job(alice))
    waiting = make_job(alice)
    with pytest.raises(Conflict):
        job_requeue(job=waiting, by="olga")
    client.force_login(User.objects.create_superuser("olga", "o@example.com", "pw"))
    answer = client.post("/admin/jobs/job/", {
        "action": "requeue", "_selected_action": [running.job_id, waiting.pk]}, follow=True)
    assert [m.message for m in answer.context["messages"]] == [
        f"Asked to stop and requeue: {running.job_id}.",
        f"job {waiting.pk} is QUEUED: only a running job is requeued"]
    job = Job.objects.get(pk=running.job_id)
    assert job.state == "PREEMPTING" and job.events.last().reason == "requeued by olga"
    attempt_finish(attempt_id=running.pk, token=running.token,
                   result=AttemptResult("PREEMPTED", 75))
    assert Job.objects.get(pk=running.job_id).state == "QUEUED"


def test_a_node_whose_worker_stops_drains_itself_and_returns_when_it_starts(alice):
    from workers.services.fleet import node_worker_stopping

    node = make_node("n1", gpus=1)
    attempt = _run(make_job(alice))
    assert node_worker_stopping("n1") == 1
    assert Attempt.objects.get(pk=attempt.pk).stop_requested == "preempt"
    assert Job.objects.get(pk=attempt.job_id).state == "PREEMPTING"
    assert Node.objects.get(pk=node.pk).state == "DRAINING"
    make_node("n1", gpus=1)  # its worker starts again and registers it
    assert Node.objects.get(pk=node.pk).state == "ACTIVE"


@pytest.mark.parametrize("operator", [node_cordon, node_drain])
def test_an_operators_mark_outlives_the_workers_stop_and_start(alice, operator):
    from workers.services.fleet import node_worker_stopping

    node = make_node("n1", gpus=1)
    attempt = _run(make_job(alice))
    operator(node)
    state = Node.objects.get(pk=node.pk).state
    assert node_worker_stopping("n1") == 1  # its jobs are asked to stop all the same
    assert Attempt.objects.get(pk=attempt.pk).stop_requested == "preempt"
    make_node("n1", gpus=1)
    assert Node.objects.get(pk=node.pk).state == state != "ACTIVE"
