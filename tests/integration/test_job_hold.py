"""A waiting job is held out of the queue and released, by its client or an operator: held,
no round places it; released, it queues with its wait counted from then, or waits for the
jobs it runs after. Attacked: a round that read the job before its hold, a job it runs
after ending as it is released, a client releasing an operator's hold, jobs with GPUs, and
holds and releases racing each other and the rounds (invariant: a job is HELD exactly while
someone holds it or a job it runs after has still to succeed)."""

from functools import partial

import pytest
from django.utils import timezone

from jobs import policy as P
from jobs.models import GpuBinding, Job
from jobs.scheduler.apply import apply_decisions
from jobs.scheduler.snapshot import load_snapshot
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.errors import Forbidden
from jobs.services.job_hold import OPERATOR, job_hold, job_release
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_job, make_node, start_placed
from tests.support.race import hold_and_release_each, race
from workers.services.attempts import AttemptResult, attempt_finish
from workers.services.reaper import release_due_retries

pytestmark = pytest.mark.django_db(transaction=True)
OK = AttemptResult("SUCCEEDED", 0)


def _job(pk: int) -> Job:
    return Job.objects.get(pk=pk)


def _consistent(job: Job) -> bool:
    """HELD exactly while someone holds it or a job it runs after has still to succeed."""
    waiting = job.after.exclude(state="SUCCEEDED").exists()
    return (job.state == "HELD") == (bool(job.hold) or waiting) and (
        not job.hold or job.state == "HELD")


def test_a_held_job_waits_out_of_the_queue_and_released_queues_from_then(api, alice):
    make_node("n1", gpus=8)
    job_id = api.post("/api/v1/jobs", {"prompt": "a heron"}, format="json").json()["id"]
    held = api.post(f"/api/v1/jobs/{job_id}/hold")
    assert held.status_code == 200 and held.json()["state"] == "HELD"
    assert held.json()["hold"] == "client" and held.json()["pending"]["code"] == "hold"
    scheduler_tick_run()
    assert _job(job_id).state == "HELD" and not GpuBinding.objects.exists()
    assert api.post(f"/api/v1/jobs/{job_id}/hold").json()["state"] == "HELD"  # no change
    before = timezone.now()
    released = api.post(f"/api/v1/jobs/{job_id}/release")
    assert released.json()["state"] == "QUEUED" and released.json()["hold"] is None
    assert _job(job_id).enqueued_at >= before  # a hold banks no age
    scheduler_tick_run()
    assert _job(job_id).state == "SCHEDULED"
    again = api.post(f"/api/v1/jobs/{job_id}/release")
    assert again.status_code == 409 and again.json()["error"]["code"] == "job_not_held"
    moves = [(e.from_state, e.to_state) for e in _job(job_id).events.order_by("pk")]
    assert moves[1:] == [("QUEUED", "HELD"), ("HELD", "QUEUED"), ("QUEUED", "SCHEDULED")]


def test_a_round_that_read_the_job_before_its_hold_places_nothing(api, alice):
    make_node("n1", gpus=8)
    job = make_job(alice)
    now = timezone.now()
    decisions = P.decide(load_snapshot(now))
    assert [p.job_id for p in decisions.placements] == [job.pk]
    job_hold(job=job)
    report = apply_decisions(decisions, now)
    assert (report.placed, report.refused) == (0, 1)
    assert _job(job.pk).state == "HELD" and not GpuBinding.objects.exists()


def test_a_job_held_behind_others_stays_held_for_its_release(alice):
    make_node(gpus=1)
    first = make_job(alice)
    then = job_submit(organization=alice, spec=JobSpec(prompt="next", after=(first.pk,)))
    job_hold(job=then)
    assert _job(then.pk).pending_code == "hold"
    attempt = start_placed(first)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=OK)
    assert _job(then.pk).state == "HELD"  # its last dependency succeeded; the hold stays
    assert job_release(job=_job(then.pk)).state == "QUEUED"


def test_released_before_the_jobs_it_runs_after_it_waits_for_them_again(alice):
    first = make_job(alice)
    then = job_submit(organization=alice, spec=JobSpec(prompt="next", after=(first.pk,)))
    released = job_release(job=job_hold(job=then))
    assert (released.state, released.hold, released.pending_code) == ("HELD", "", "dependency")
    make_node(gpus=1)
    attempt = start_placed(first)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=OK)
    assert _job(then.pk).state == "QUEUED"


def test_a_failed_dependency_cancels_a_held_job_too(alice):
    first = make_job(alice)
    then = job_submit(organization=alice, spec=JobSpec(prompt="next", after=(first.pk,)))
    job_hold(job=then, by=OPERATOR)
    job_cancel(job=first)
    assert (_job(then.pk).state, _job(then.pk).error_code) == ("CANCELLED", "dependency_failed")


def test_an_operators_hold_is_not_the_clients_to_release(api, alice):
    job = make_job(alice)
    job_hold(job=job, by=OPERATOR, note="looks like abuse")
    body = api.get(f"/api/v1/jobs/{job.pk}").json()
    assert body["hold"] == "operator" and "looks like abuse" in body["pending"]["reason"]
    assert job_hold(job=_job(job.pk)).hold == "operator"  # the client's is weaker
    refused = api.post(f"/api/v1/jobs/{job.pk}/release")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "held_by_operator"
    with pytest.raises(Forbidden):
        job_release(job=_job(job.pk))
    assert job_release(job=_job(job.pk), by=OPERATOR).state == "QUEUED"


def test_a_running_job_that_would_start_over_or_ended_or_anothers_is_not_held(api, alice, bob):
    make_node(gpus=1)
    running = make_job(alice)
    start_placed(running)
    answer = api.post(f"/api/v1/jobs/{running.pk}/hold")  # it would start over: refused
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "not_checkpointable"
    ended = make_job(alice)
    api.post(f"/api/v1/jobs/{ended.pk}/cancel")
    assert api.post(f"/api/v1/jobs/{ended.pk}/hold").json()["error"]["code"] == "job_finished"
    theirs = make_job(bob)
    assert api.post(f"/api/v1/jobs/{theirs.pk}/hold").status_code == 404
    assert _job(theirs.pk).state == "QUEUED"


def test_a_retry_waiting_job_is_held_instead_of_queued(alice):
    job = make_job(alice)
    Job.objects.filter(pk=job.pk).update(state="RETRY_WAIT", retry_at=timezone.now())
    held = job_hold(job=_job(job.pk))
    assert (held.state, held.retry_at) == ("HELD", None)
    assert release_due_retries(now=timezone.now()) == 0
    assert _job(job.pk).state == "HELD"


def test_holds_releases_and_rounds_racing_leave_every_job_consistent(alice):
    make_node("n1", gpus=2)
    first = make_job(alice)
    jobs = [make_job(alice) for _ in range(4)] + [
        job_submit(organization=alice, spec=JobSpec(prompt="next", after=(first.pk,)))
        for _ in range(2)]
    attempt = start_placed(first)

    flip = partial(hold_and_release_each, [job.pk for job in jobs], refusals={
        "job_not_held", "not_checkpointable", "held_by_operator", "busy"})
    assert race(partial(flip, by="client"), partial(flip, by=OPERATOR), scheduler_tick_run,
                partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                        result=OK)) == []
    scheduler_tick_run()
    for job in jobs:
        job = _job(job.pk)
        assert _consistent(job), (job.pk, job.state, job.hold)
        bound = GpuBinding.objects.filter(attempt__job=job, released_at__isnull=True)
        # a job held before its node started it gave its GPUs back; placed again, it binds anew
        assert bound.count() == (job.gpus if job.state == "SCHEDULED" else 0), job.state


def test_an_operator_holds_with_a_note_from_admin_and_releases(client, alice):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("op", password="pw-op-1"))
    job = make_job(alice)
    asked = client.post("/admin/jobs/job/", {"action": "hold", "_selected_action": [job.pk]})
    assert "Hold 1 job" in asked.content.decode() and _job(job.pk).state == "QUEUED"
    client.post("/admin/jobs/job/", {"action": "hold", "_selected_action": [job.pk],
                                     "apply": "Hold", "note": "billing check"})
    held = _job(job.pk)
    assert (held.hold, held.pending_reason) == ("operator", "held by an operator: billing check")
    client.post("/admin/jobs/job/", {"action": "release", "_selected_action": [job.pk]})
    assert _job(job.pk).state == "QUEUED"


def test_a_member_holds_and_releases_on_the_jobs_page(owner, alice):
    job = make_job(alice)
    owner.post(f"/dashboard/jobs/{job.pk}/hold")
    page = owner.get(f"/dashboard/jobs/{job.pk}").content.decode()
    assert _job(job.pk).hold == "client" and "Release: queue it again" in page
    owner.post(f"/dashboard/jobs/{job.pk}/hold", {"release": "1"})
    assert _job(job.pk).state == "QUEUED"
    job_hold(job=_job(job.pk), by=OPERATOR)
    owner.post(f"/dashboard/jobs/{job.pk}/hold", {"release": "1"})
    assert _job(job.pk).hold == "operator"
    assert "only an operator releases it" in owner.get(f"/dashboard/jobs/{job.pk}").content.decode()


def test_an_endpoint_that_asked_is_told_who_holds_the_job(alice):
    from jobs.models import WebhookDelivery, WebhookEndpoint

    WebhookEndpoint.objects.create(organization=alice, url="https://93.184.216.34/hook",
                                   events=["job.held"])
    job = make_job(alice)
    job_hold(job=job, by=OPERATOR)
    notice = WebhookDelivery.objects.get().payload
    assert (notice["event"], notice["job"]["state"], notice["job"]["hold"]) == (
        "job.held", "HELD", "operator")


def test_a_batch_is_held_and_released_by_its_label(api, alice):
    make_node(gpus=1)
    running = api.post("/api/v1/jobs", {"prompt": "x", "labels": {"batch": "b7"}},
                       format="json").json()["id"]
    start_placed(_job(running))
    ids = [api.post("/api/v1/jobs", {"prompt": "x", "labels": {"batch": batch}},
                    format="json").json()["id"] for batch in ("b7", "b7", "b7", "b8")]
    held = api.post("/api/v1/jobs/hold", {"label": ["batch:b7"]}, format="json")
    assert held.status_code == 200
    assert held.json() == {"held": ids[:3], "stopping": [], "left": 0}  # it would start over
    assert [_job(pk).state for pk in (running, *ids)] == ["RUNNING", "HELD", "HELD", "HELD",
                                                          "QUEUED"]
    assert api.post("/api/v1/jobs/hold", {"label": ["batch:b7"]},
                    format="json").json() == {"held": [], "stopping": [], "left": 0}
    job_hold(job=_job(ids[0]), by=OPERATOR)
    released = api.post("/api/v1/jobs/release", {"label": ["batch:b7"]}, format="json")
    assert released.json() == {"released": ids[1:3], "left": 0, "refused": None}
    assert (_job(ids[0]).hold, _job(ids[1]).state) == ("operator", "QUEUED")
    nothing = api.post("/api/v1/jobs/hold", {"label": []}, format="json")
    assert nothing.status_code == 400 and nothing.json()["error"]["code"] == "invalid"
