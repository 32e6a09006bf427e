"""A maintenance window set ahead: the node stays in service and starts only jobs whose time
limit (and the kill grace after it) ends before the window; when it comes the node drains
and what still runs there checkpoints and moves; ended, the node takes any job again."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.errors import ValidationFailed
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_node
from workers.models import Node
from workers.services.attempts import attempt_start
from workers.services.fleet import (
    maintenance_due,
    node_cordon,
    node_drain,
    node_return_to_service,
    node_schedule_maintenance,
)
from workers.services.nodes import MAINTENANCE

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = 3600


def make_job(org, time_limit_s: int) -> Job:
    return job_submit(organization=org, spec=JobSpec(prompt="a fox", gpus=1,
                                                     time_limit_s=time_limit_s))


def _state(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_a_node_going_into_maintenance_starts_only_the_jobs_that_end_before_it(alice, api):
    node = make_node("n1", gpus=2)
    node_schedule_maintenance(node, timezone.now() + timedelta(hours=1))
    long = make_job(alice, 2 * HOUR)
    short = make_job(alice, 600)
    scheduler_tick_run()
    assert _state(short).state == "SCHEDULED"
    waiting = api.get(f"/api/v1/jobs/{long.pk}").json()
    assert waiting["state"] == "QUEUED"
    assert waiting["pending"]["code"] == "maintenance"
    assert "leave service for maintenance by" in waiting["pending"]["reason"]
    node_schedule_maintenance(node, None)  # the work is done
    scheduler_tick_run()
    assert _state(long).state == "SCHEDULED"


def test_a_job_that_checkpoints_runs_till_the_window_unless_operators_say_otherwise(
        alice, settings):
    node = make_node("n1", gpus=1)
    node_schedule_maintenance(node, timezone.now() + timedelta(hours=1))
    plain = make_job(alice, 4 * HOUR)
    scheduler_tick_run()
    assert _state(plain).pending_code == "maintenance"
    Job.objects.filter(pk=plain.pk).update(checkpointable=True)
    settings.GPUSCHED_WINDOW_RUN_S = 0  # only jobs that end by the window
    scheduler_tick_run()
    assert _state(plain).pending_code == "maintenance"
    settings.GPUSCHED_WINDOW_RUN_S = 600
    scheduler_tick_run()
    assert _state(plain).state == "SCHEDULED"  # it moves when the window comes


def test_the_kill_grace_after_a_time_limit_counts_against_the_window(alice, settings):
    settings.GPUSCHED_KILL_GRACE_S = 120
    node = make_node("n1", gpus=1)
    # the job's limit ends 60 s before the window, but a job past its limit has 120 s to stop
    node_schedule_maintenance(node, timezone.now() + timedelta(seconds=600 + 60))
    job = make_job(alice, 600)
    scheduler_tick_run()
    assert _state(job).state == "QUEUED" and _state(job).pending_code == "maintenance"
    node_schedule_maintenance(node, timezone.now() + timedelta(seconds=600 + 300))
    scheduler_tick_run()
    assert _state(job).state == "SCHEDULED"


def _running(job: Job) -> Attempt:
    attempt = Attempt.objects.get(job=job, ended_at__isnull=True)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    return attempt


def test_when_the_window_comes_the_node_drains_and_its_jobs_checkpoint_to_move(alice, client,
                                                                              api):
    node = make_node("n1", gpus=2)
    job = make_job(alice, 2 * HOUR)
    scheduler_tick_run()
    attempt = _running(job)
    make_node("n2", gpus=1, gpu_type="A100")
    # set after the job started: its limit ends long after the window
    node_schedule_maintenance(node, timezone.now() + timedelta(hours=1))
    scheduler_tick_run()
    assert Node.objects.get(pk=node.pk).state == "ACTIVE"  # an hour ahead: nothing yet
    assert Attempt.objects.get(pk=attempt.pk).stop_requested == ""
    node_schedule_maintenance(node, timezone.now() + timedelta(seconds=5))  # within the grace
    metrics = client.get("/metrics").content.decode()
    assert 'gpusched_gpus_in_maintenance_windows{gpu_type="H100"} 2' in metrics
    assert 'gpusched_gpus_in_maintenance_windows{gpu_type="A100"}' not in metrics
    scheduler_tick_run()
    drained = Node.objects.get(pk=node.pk)
    assert (drained.state, drained.state_reason) == ("DRAINING", MAINTENANCE)
    asked = Attempt.objects.get(pk=attempt.pk)
    assert asked.stop_requested == "preempt"
    assert asked.stop_deadline <= timezone.now() + timedelta(seconds=10)  # the kill grace
    assert _state(job).state == "PREEMPTING"
    assert maintenance_due(timezone.now()) == 0  # asked once
    pair = job_submit(organization=alice, spec=JobSpec(prompt="a fox", gpus=2,
                                                       time_limit_s=60))
    scheduler_tick_run()
    waiting = api.get(f"/api/v1/jobs/{pair.pk}").json()["pending"]
    assert waiting["code"] == "out_of_service"  # n2 is too small: it waits for n1's return


def test_an_operators_cordon_stays_but_its_jobs_still_move_when_the_window_comes(alice):
    node = make_node("n1", gpus=1)
    job = make_job(alice, 2 * HOUR)
    scheduler_tick_run()
    attempt = _running(job)
    node_cordon(node)
    node_schedule_maintenance(node, timezone.now() - timedelta(minutes=1))
    assert maintenance_due(timezone.now()) == 1
    assert Node.objects.get(pk=node.pk).state == "CORDONED"
    assert Attempt.objects.get(pk=attempt.pk).stop_requested == "preempt"


def test_ending_moving_or_returning_a_node_from_its_window_puts_it_back_in_service(alice):
    node = make_node("n1", gpus=1)
    for end in (lambda: node_schedule_maintenance(node, None),
                lambda: node_schedule_maintenance(node, timezone.now() + timedelta(hours=3)),
                lambda: node_return_to_service(node)):
        node_schedule_maintenance(node, timezone.now() - timedelta(minutes=1))
        scheduler_tick_run()
        assert Node.objects.get(pk=node.pk).state == "DRAINING"
        end()
        scheduler_tick_run()
        assert Node.objects.get(pk=node.pk).state == "ACTIVE"
    assert Node.objects.get(pk=node.pk).maintenance_at is None  # returned: the work is done
    job = make_job(alice, 60)
    scheduler_tick_run()
    assert _state(job).state == "SCHEDULED"


def test_a_window_given_an_end_returns_its_node_then_by_itself(alice):
    node = make_node("n1", gpus=1)
    now = timezone.now()
    node_schedule_maintenance(node, now - timedelta(hours=1), now + timedelta(minutes=1))
    scheduler_tick_run()
    assert Node.objects.get(pk=node.pk).state == "DRAINING"
    job = make_job(alice, 60)
    scheduler_tick_run()
    assert _state(job).pending_code == "out_of_service"
    assert "the first is due back by" in _state(job).pending_reason
    assert maintenance_due(now + timedelta(minutes=2)) == 0  # its end has come
    back = Node.objects.get(pk=node.pk)
    assert (back.state, back.maintenance_at, back.maintenance_until) == ("ACTIVE", None, None)
    scheduler_tick_run()
    assert _state(job).state == "SCHEDULED"
    with pytest.raises(ValidationFailed) as refused:
        node_schedule_maintenance(node, now, now - timedelta(minutes=1))
    assert refused.value.code == "maintenance_ends_before_it_begins"
    assert Node.objects.get(pk=node.pk).maintenance_at is None  # nothing changed


def test_an_operators_drain_outlasts_the_end_of_a_window(alice):
    node = make_node("n1", gpus=1)
    now = timezone.now()
    node_schedule_maintenance(node, now - timedelta(hours=1), now + timedelta(minutes=1))
    node_drain(node)  # the operator's own: the window's end leaves it
    maintenance_due(now + timedelta(minutes=2))
    assert Node.objects.get(pk=node.pk).state == "DRAINING"
    assert Node.objects.get(pk=node.pk).maintenance_at is None


def test_a_node_back_from_down_during_its_window_drains_again(alice):
    node = make_node("n1", gpus=1)
    node_schedule_maintenance(node, timezone.now() - timedelta(minutes=1))
    Node.objects.filter(pk=node.pk).update(state="DOWN", state_reason="")
    assert maintenance_due(timezone.now()) == 0
    make_node("n1", gpus=1)  # its worker starts again while the work goes on
    scheduler_tick_run()
    assert Node.objects.get(pk=node.pk).state == "DRAINING"


def test_operators_schedule_and_end_maintenance_from_the_node_list(client, alice):
    client.force_login(User.objects.create_superuser("olga", "olga@example.com", "pw"))
    nodes = [make_node("n1", gpus=1), make_node("n2", gpus=1), make_node("n3", gpus=1)]
    changelist = reverse("admin:workers_node_changelist")
    chosen = [nodes[0].pk, nodes[1].pk]
    asked = client.post(changelist, {"action": "schedule_maintenance",
                                     "_selected_action": chosen})
    assert asked.status_code == 200 and b"Schedule maintenance" in asked.content  # the form
    assert not Node.objects.filter(maintenance_at__isnull=False).exists()
    client.post(changelist, {"action": "schedule_maintenance", "_selected_action": chosen,
                             "apply": "1", "at": "2030-01-02 14:00", "hours": "4"})
    at = {n.name: n.maintenance_at for n in Node.objects.all()}
    assert at["n1"] == at["n2"] and at["n1"].isoformat() == "2030-01-02T14:00:00+00:00"
    assert at["n3"] is None
    assert Node.objects.get(name="n1").maintenance_until.isoformat() == "2030-01-02T18:00:00+00:00"
    change = reverse("admin:workers_node_change", args=[nodes[0].pk])
    form = client.get(change).context["adminform"].form
    data = {**{k: v for k, v in form.initial.items() if v is not None}, "labels": "{}",
            "maintenance_until_0": "2030-01-02", "maintenance_until_1": "13:00",
            "maintenance_at_0": "2030-01-02", "maintenance_at_1": "14:00",
            "gpus-TOTAL_FORMS": "0", "gpus-INITIAL_FORMS": "0"}
    refused = client.post(change, data)
    assert refused.status_code == 200 and b"must end after it begins" in refused.content
    # a window that has come, moved later in the form: the node drained for it returns
    node_schedule_maintenance(nodes[0], timezone.now() - timedelta(minutes=1))
    scheduler_tick_run()
    assert Node.objects.get(pk=nodes[0].pk).state == "DRAINING"
    moved = client.post(change, {**data, "maintenance_until_0": "", "maintenance_until_1": ""})
    assert moved.status_code == 302
    assert Node.objects.get(pk=nodes[0].pk).state == "ACTIVE"
    client.post(changelist, {"action": "end_maintenance", "_selected_action": [nodes[0].pk]})
    assert Node.objects.get(name="n1").maintenance_at is None
    assert Node.objects.get(name="n2").maintenance_at is not None


def test_a_script_schedules_and_ends_maintenance_by_node_name(capsys):
    make_node("n1", gpus=1)
    make_node("n2", gpus=1)
    call_command("node_maintenance", "n1", "n2", "--at", "2030-01-02T14:00Z", "--hours", "1.5")
    assert ("leave service at 2030-01-02T14:00:00+00:00, back at 2030-01-02T15:30:00+00:00"
            in capsys.readouterr().out)
    with pytest.raises(CommandError, match="--hours goes with --at"):
        call_command("node_maintenance", "n1", "--at", "2030-01-02T14:00Z", "--hours", "0")
    assert Node.objects.filter(maintenance_at__isnull=False).count() == 2
    with pytest.raises(CommandError, match="no node n9"):
        call_command("node_maintenance", "n1", "n9", "--done")
    with pytest.raises(CommandError, match="not a date"):
        call_command("node_maintenance", "n1", "--at", "tomorrow")
    assert Node.objects.filter(maintenance_at__isnull=False).count() == 2  # nothing changed
    call_command("node_maintenance", "n1", "--done")
    assert list(Node.objects.filter(maintenance_at__isnull=False).values_list(
        "name", flat=True)) == ["n2"]
