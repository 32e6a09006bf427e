"""Cancels by an operator from admin, and the record every cancel of a running job leaves:
who asked is on the job as soon as asked, though the job ends only when its node reports.
Attacked: a cancel asked twice, and cancels racing each other and the attempt's end
(invariant: the end's report never fails for a cancel, the job ends once, and a cancel is
recorded once)."""

from functools import partial

import pytest
from django.contrib.auth import get_user_model

from jobs.models import Attempt, Job
from jobs.services.cancellation import job_cancel
from jobs.services.errors import Conflict
from tests.support.factories import make_job, make_node, start_placed
from tests.support.race import race
from workers.services.attempts import AttemptResult, attempt_finish, attempt_heartbeat

pytestmark = pytest.mark.django_db(transaction=True)
STOPPED = AttemptResult("CANCELLED", -15)


def _job(pk: int) -> Job:
    return Job.objects.get(pk=pk)


@pytest.fixture
def operator(client):
    client.force_login(get_user_model().objects.create_superuser("op", password="pw-op-1"))
    return client


def _cancel_from_admin(operator, *jobs: Job, note: str = "") -> None:
    operator.post("/admin/jobs/job/", {"action": "cancel", "apply": "Cancel", "note": note,
                                       "_selected_action": [job.pk for job in jobs]})


def test_an_operator_cancels_a_waiting_and_a_running_job_with_a_note(operator, alice):
    make_node(gpus=1)
    running, waiting = make_job(alice), make_job(alice)
    attempt = start_placed(running)
    asked = operator.post("/admin/jobs/job/", {"action": "cancel",
                                               "_selected_action": [waiting.pk]})
    assert "Cancel 1 job" in asked.content.decode() and _job(waiting.pk).state == "QUEUED"
    _cancel_from_admin(operator, waiting, running, note="abuse report 118")
    waiting = _job(waiting.pk)
    assert (waiting.state, waiting.error_code, waiting.error) == (
        "CANCELLED", "cancelled", "cancelled by an operator: abuse report 118")
    assert _job(running.pk).state == "RUNNING"  # its node stops it
    event = _job(running.pk).events.latest("pk")
    assert (event.from_state, event.to_state, event.reason) == (
        "RUNNING", "RUNNING", "cancelled by an operator: abuse report 118; stopping on its node")
    verdict = attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token)
    assert verdict.action == "cancel"
    ended = attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                           result=AttemptResult("CANCELLED", -15, stderr_tail="step 40\n"))
    assert (ended.state, ended.error) == (
        "CANCELLED", "cancelled by an operator: abuse report 118\nstep 40\n")


def test_a_cancel_asked_twice_of_a_running_job_is_recorded_once(api, alice):
    make_node(gpus=1)
    job = make_job(alice)
    start_placed(job)
    for _ in range(2):
        answer = api.post(f"/api/v1/jobs/{job.pk}/cancel").json()
        assert answer["state"] == "RUNNING" and answer["stopping"]["for"] == "cancel"
    listed = api.get("/api/v1/jobs").json()["results"]
    assert [(j["id"], j["stopping"]["for"]) for j in listed] == [(job.pk, "cancel")]
    marks = _job(job.pk).events.filter(from_state="RUNNING", to_state="RUNNING")
    assert [e.reason for e in marks] == ["cancelled by the client; stopping on its node"]


def test_cancels_racing_the_attempts_end_never_fail_its_report(alice):
    make_node(gpus=2)
    for outcome in (STOPPED, AttemptResult("SUCCEEDED", 0)) * 3:
        job = make_job(alice)
        attempt = start_placed(job)
        refused: list[str] = []

        def cancel(job=job, refused=refused):
            try:
                job_cancel(job=_job(job.pk), reason="cancelled by an operator")
            except Conflict as exc:
                refused.append(exc.code)

        end = partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                      result=outcome)
        assert race(cancel, cancel, end) == []
        job = _job(job.pk)
        assert job.state == outcome.outcome and set(refused) <= {"job_finished"}
        assert Attempt.objects.get(pk=attempt.pk).ended_at is not None
        assert job.events.filter(to_state=job.state).count() == 1
        assert job.events.filter(from_state="RUNNING", to_state="RUNNING").count() <= 1


@pytest.mark.parametrize("ended", ["preempted", "lost"])
def test_a_cancel_read_before_its_try_ended_otherwise_still_cancels_the_job(alice, ended):
    """The cancel reads the job RUNNING; before it acts, the try ends without ending the
    job (a preemption queues it, a lost node sends it to retry). The cancel is not lost:
    it cancels the job as it is now, which would otherwise run again."""
    from django.utils import timezone

    from workers.services.reaper import reap_expired_attempts

    make_node(gpus=2)
    job = make_job(alice)
    attempt = start_placed(job)
    read = _job(job.pk)  # what the cancel's request loaded
    if ended == "preempted":
        from jobs.transitions import transition

        Attempt.objects.filter(pk=attempt.pk).update(stop_requested="preempt")
        transition(_job(job.pk), "PREEMPTING", attempt=attempt, reason="preempted")
        attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                       result=AttemptResult("PREEMPTED", 75))
    else:
        Attempt.objects.filter(pk=attempt.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
        reap_expired_attempts(now=timezone.now())
    assert _job(job.pk).state in ("QUEUED", "RETRY_WAIT")
    assert job_cancel(job=read).state == "CANCELLED"
    assert _job(job.pk).state == "CANCELLED"
