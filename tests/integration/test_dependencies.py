"""A job submitted to run after others waits HELD, out of the queue, until they succeed, then
queues with its wait counted from then; once one of them ends otherwise it is cancelled, and
the jobs after it too. One ending while a job after it is submitted leaves none held."""

from functools import partial

import pytest
from django.utils import timezone

from credits.models import GpuPrice, Hold
from credits.services.grants import credits_grant
from jobs.models import Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.errors import ValidationFailed
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_job, make_node, start_placed
from tests.support.ledger import assert_ledger_consistent
from tests.support.race import race
from workers.services.attempts import AttemptResult, attempt_finish

pytestmark = pytest.mark.django_db(transaction=True)
OK = AttemptResult("SUCCEEDED", 0)
BAD_INPUT = AttemptResult("FAILED", 2, "usage: bad", None, "exit_2")


def _after(org, *jobs: Job, **spec) -> Job:
    return job_submit(organization=org, spec=JobSpec(prompt="next", after=tuple(
        j.pk for j in jobs), **spec))


def _end(job: Job, result: AttemptResult = OK) -> Job:
    attempt = start_placed(job)
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=result)


def _state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


def test_a_job_waits_held_until_every_job_it_runs_after_succeeds(alice, api):
    make_node(gpus=1)
    first, second = make_job(alice), make_job(alice)
    then = _after(alice, first, second)
    assert then.state == "HELD"
    body = api.get(f"/api/v1/jobs/{then.pk}").json()
    assert body["after"] == sorted([first.pk, second.pk])
    assert body["pending"]["code"] == "dependency"
    assert body["pending"]["reason"] == f"waiting for jobs {first.pk}, {second.pk} to succeed"
    _end(first)
    assert _state(then) == "HELD"  # out of the queue: the round placed only `second`
    assert Job.objects.get(pk=then.pk).pending_reason == (
        f"waiting for job {second.pk} to succeed")
    before = timezone.now()
    _end(second)
    then.refresh_from_db()
    assert then.state == "QUEUED" and then.enqueued_at >= before  # its wait starts now
    assert then.events.latest("id").reason == f"job {second.pk} succeeded, the last it " \
        "waited for"
    scheduler_tick_run()
    assert _state(then) == "SCHEDULED"


def test_a_failure_cancels_the_jobs_after_it_down_the_chain_and_frees_their_credits(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=100_000)
    make_node(gpus=1)
    first = make_job(alice)
    second = _after(alice, first)
    third = _after(alice, second)
    _end(first, BAD_INPUT)
    for job in (second, third):
        job.refresh_from_db()
        assert (job.state, job.error_code) == ("CANCELLED", "dependency_failed")
        assert Hold.objects.get(job=job).closed_at is not None
    assert f"job {first.pk}, which it runs after, ended FAILED" in Job.objects.get(
        pk=second.pk).error
    assert_ledger_consistent()


def test_a_job_after_jobs_that_already_succeeded_queues_at_once(alice):
    make_node(gpus=1)
    done = _end(make_job(alice))
    assert _after(alice, done).state == "QUEUED"


def test_after_a_job_that_failed_unknown_or_of_another_org_is_refused(alice, bob, api):
    make_node(gpus=1)
    failed = _end(make_job(alice), BAD_INPUT)
    theirs = make_job(bob)
    response = api.post("/api/v1/jobs", {"prompt": "x", "after": [failed.pk]}, format="json")
    assert (response.status_code, response.json()["error"]["code"]) == (
        409, "dependency_failed")
    for ids in ([theirs.pk], [10**9]):
        response = api.post("/api/v1/jobs", {"prompt": "x", "after": ids}, format="json")
        assert (response.status_code, response.json()["error"]["code"]) == (
            400, "unknown_dependency"), ids
    response = api.post("/api/v1/jobs", {"prompt": "x", "after": list(range(1, 18))},
                        format="json")
    assert response.status_code == 400
    assert Job.objects.filter(organization=alice).count() == 1  # nothing else was accepted


def test_a_held_job_is_cancelled_by_its_client_and_counts_against_the_queue_limit(alice):
    from jobs.models import Tier
    from jobs.services.admission import Refused

    first = make_job(alice)
    then = _after(alice, first)
    Tier.objects.filter(pk=alice.tier_id).update(max_queued_jobs_per_org=2)
    alice.refresh_from_db()
    with pytest.raises(Refused):
        make_job(alice)
    job_cancel(job=then)
    assert _state(then) == "CANCELLED"
    make_job(alice)  # its place is free again


def test_a_retried_submission_with_the_same_key_and_after_gets_the_same_job(alice, api):
    first = make_job(alice)
    body = {"prompt": "x", "after": [first.pk]}
    one = api.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    two = api.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert one.json()["id"] == two.json()["id"] and two["Idempotent-Replayed"] == "true"
    other = api.post("/api/v1/jobs", {"prompt": "x"}, format="json",
                     HTTP_IDEMPOTENCY_KEY="k1")
    assert other.json()["error"]["code"] == "idempotency_key_reused"


def test_a_job_ending_as_one_after_it_is_submitted_leaves_none_held(alice, settings):
    """Ten races of the last dependency's end against the submission of a job after it:
    each new job is QUEUED, at once or when the end commits; never HELD for good."""
    make_node(gpus=1)
    for _ in range(10):
        first = make_job(alice)
        attempt = start_placed(first)
        assert race(partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                            result=OK), partial(_after, alice, first)) == []
        then = Job.objects.get(after=first)
        assert then.state == "QUEUED"
        job_cancel(job=then)  # out of the next race's way


def test_a_job_after_its_batch_ends_runs_with_failures_and_all(alice, api):
    make_node(gpus=1)
    clips = [make_job(alice) for _ in range(3)]
    stitch = api.post("/api/v1/jobs", {"prompt": "stitch", "after": [c.pk for c in clips],
                                       "after_mode": "ended"}, format="json").json()
    body = api.get(f"/api/v1/jobs/{stitch['id']}").json()
    assert (body["state"], body["after_mode"]) == ("HELD", "ended")
    assert body["pending"]["reason"].endswith("to end")
    _end(clips[0], BAD_INPUT)  # a failure cancels nothing here
    job_cancel(job=clips[1])
    assert Job.objects.get(pk=stitch["id"]).state == "HELD"
    assert Job.objects.get(pk=stitch["id"]).pending_reason == (
        f"waiting for job {clips[2].pk} to end")
    _end(clips[2])
    assert Job.objects.get(pk=stitch["id"]).state == "QUEUED"
    # and after jobs that ended already, however, it queues at once
    late = _after(alice, clips[0], clips[1], after_mode="ended")
    assert late.state == "QUEUED"
    refused = api.post("/api/v1/jobs", {"prompt": "x", "after": [clips[0].pk],
                                        "after_mode": "sometimes"}, format="json")
    assert refused.status_code == 400
    with pytest.raises(ValidationFailed):
        _after(alice, clips[0], after_mode="sometimes")


def test_released_from_a_hold_it_waits_for_its_batch_to_end(alice):
    from jobs.services.job_hold import job_hold, job_release

    make_node(gpus=1)
    first, second = make_job(alice), make_job(alice)
    then = _after(alice, first, second, after_mode="ended")
    job_hold(job=then)
    _end(first, BAD_INPUT)
    released = job_release(job=Job.objects.get(pk=then.pk))
    assert (released.state, released.pending_reason) == (
        "HELD", f"waiting for job {second.pk} to end")
    _end(second, BAD_INPUT)
    assert _state(then) == "QUEUED"


def test_a_job_ending_as_one_after_its_end_is_submitted_leaves_none_held(alice):
    """The race above, for a job that waits for the end alone, the end a failure."""
    make_node(gpus=1)
    for _ in range(5):
        first = make_job(alice)
        attempt = start_placed(first)
        assert race(partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                            result=BAD_INPUT),
                    partial(_after, alice, first, after_mode="ended")) == []
        then = Job.objects.get(after=first)
        assert then.state == "QUEUED"
        job_cancel(job=then)  # out of the next race's way
