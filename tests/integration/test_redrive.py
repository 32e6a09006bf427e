"""An operator runs dead-lettered, failed or timed-out jobs again as new jobs; the old ones
keep their end and history, and a job that succeeded or was cancelled is not run again."""

import pytest
from django.contrib.auth import get_user_model

from jobs.models import Job, JobEvent
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.errors import Conflict
from jobs.services.redrive import job_redrive
from jobs.transitions import transition
from tests.support.factories import make_job, make_node

pytestmark = pytest.mark.django_db


def _ended(org, state, **spec):
    job = make_job(org, gpus=2, **spec)
    if state == "SUCCEEDED":  # only a job that ran succeeds
        for step in ("SCHEDULED", "RUNNING"):
            job = transition(job, step, reason="test")
    return transition(job, state, reason="test")


def test_a_dead_job_runs_again_as_a_new_job_with_the_same_spec(alice):
    dead = _ended(alice, "DEAD", fail="crash")
    again = job_redrive(job=dead, by="ops")
    assert (again.state, again.gpus, again.params, again.organization_id) == (
        "QUEUED", 2, {"fail": "crash"}, alice.pk)
    assert JobEvent.objects.get(job=again).reason == f"run again from job {dead.pk} (DEAD) by ops"
    dead.refresh_from_db()
    assert dead.state == "DEAD"  # its end stays as it was
    assert job_redrive(job=dead, by="ops").pk == again.pk  # asked twice: the same copy
    assert Job.objects.count() == 2
    make_node("n1", gpus=2)
    scheduler_tick_run()
    assert Job.objects.get(pk=again.pk).state == "SCHEDULED"


@pytest.mark.parametrize("state", ["SUCCEEDED", "CANCELLED"])
def test_a_job_that_succeeded_or_was_cancelled_does_not_run_again(alice, state):
    with pytest.raises(Conflict) as refused:
        job_redrive(job=_ended(alice, state), by="ops")
    assert refused.value.code == "not_redrivable"
    assert Job.objects.count() == 1


def test_the_admin_action_runs_the_selected_jobs_again(alice, client):
    admin_user = get_user_model().objects.create_superuser("op", password="pw-op-1")
    client.force_login(admin_user)
    dead, done = _ended(alice, "DEAD"), _ended(alice, "SUCCEEDED")
    response = client.post("/admin/jobs/job/", {"action": "run_again",
                                                "_selected_action": [dead.pk, done.pk]},
                           follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "New jobs queued" in page and "only a dead, failed or timed-out job" in page
    assert Job.objects.filter(state="QUEUED").count() == 1
