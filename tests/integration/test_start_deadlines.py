"""A job sent with `start_within_s` that has not started by then is cancelled by the next
round, its hold voided, its webhook told and the jobs after it cancelled too; a job that
started in time is never touched by it, and a refused deadline queues nothing."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.test import Client
from django.utils import timezone

from credits.models import GpuPrice, Hold
from credits.services.grants import credits_grant
from jobs.models import Attempt, Job, WebhookDelivery, WebhookEndpoint
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.start_deadlines import cancel_late_starts
from jobs.services.submission import JobSpec, job_submit, job_submit_once
from tests.support.factories import make_member, make_node, start_placed
from tests.support.ledger import assert_ledger_consistent, wallet_of
from tests.support.threads import race
from workers.services.reaper import reap_expired_attempts, release_due_retries

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_cache")]


def _submit(org, within=60, **more) -> Job:
    return job_submit(organization=org, spec=JobSpec(prompt="a heron", start_within_s=within,
                                                     **more))


def _past_deadline(job: Job) -> None:
    """As if its deadline passed a second ago: its times move back together."""
    job.refresh_from_db()
    back = job.start_by - timezone.now() + timedelta(seconds=1)
    Job.objects.filter(pk=job.pk).update(start_by=F("start_by") - back,
                                         created_at=F("created_at") - back,
                                         enqueued_at=F("enqueued_at") - back)


def test_a_job_not_started_in_time_is_cancelled_and_its_credits_go_back(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=1_000)
    WebhookEndpoint.objects.create(organization=alice, url="https://hooks.example/x")
    job = _submit(alice, within=300, time_limit_s=600)
    assert (job.start_by - job.created_at).total_seconds() == pytest.approx(300, abs=1)
    assert wallet_of(alice).available == 400
    scheduler_tick_run()  # no node: it waits, its deadline ahead
    assert Job.objects.get(pk=job.pk).state == "QUEUED"

    _past_deadline(job)
    scheduler_tick_run()
    job.refresh_from_db()
    assert (job.state, job.error_code) == ("CANCELLED", "start_deadline_passed")
    assert "not started within 300 s" in job.error
    assert job.events.latest("version").reason == "not started by its deadline"
    hold = Hold.objects.get(job=job)
    assert (hold.voided, hold.posted, hold.closed_at is not None) == (600, 0, True)
    assert wallet_of(alice).available == 1_000
    assert_ledger_consistent()
    assert WebhookDelivery.objects.get(job=job).event == "job.cancelled"
    metrics = Client().get("/metrics").content.decode()
    assert 'gpusched_start_deadlines_missed_total{tier="paid"} 1' in metrics
    assert 'gpusched_start_deadlines_missed_total{tier="free"} 0' in metrics


def test_the_round_starts_no_job_past_its_deadline(alice):
    make_node("n1", gpus=1)
    job = _submit(alice)
    _past_deadline(job)
    scheduler_tick_run()  # a free GPU, but too late
    job.refresh_from_db()
    assert job.state == "CANCELLED" and not Attempt.objects.filter(job=job).exists()


def test_a_job_that_started_in_time_keeps_running_and_requeued_waits_as_any(alice):
    make_node("n1", gpus=1)
    job = _submit(alice)
    attempt = start_placed(job)
    _past_deadline(job)
    scheduler_tick_run()
    assert Job.objects.get(pk=job.pk).state == "RUNNING"
    # its node is lost: it waits again, started once, and its deadline is no longer its own
    Attempt.objects.filter(pk=attempt.pk).update(lease_expires_at=timezone.now())
    reap_expired_attempts(now=timezone.now() + timedelta(seconds=1))
    release_due_retries(now=timezone.now() + timedelta(hours=1))
    assert Job.objects.get(pk=job.pk).state == "QUEUED"
    assert cancel_late_starts(now=timezone.now()) == 0
    assert Job.objects.get(pk=job.pk).state == "QUEUED"


def test_jobs_held_after_it_are_cancelled_with_it_and_a_held_one_has_its_own(alice):
    first = _submit(alice, within=None)
    late = _submit(alice, after=(first.pk,))
    after_late = _submit(alice, within=None, after=(late.pk,))
    assert late.state == "HELD"
    _past_deadline(late)
    assert cancel_late_starts(now=timezone.now()) == 1
    late.refresh_from_db(), after_late.refresh_from_db(), first.refresh_from_db()
    assert (late.state, late.error_code) == ("CANCELLED", "start_deadline_passed")
    assert (after_late.state, after_late.error_code) == ("CANCELLED", "dependency_failed")
    assert first.state == "QUEUED"  # what it waited for is not its business


def test_a_cancel_racing_the_deadline_ends_the_job_once(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=1_000)
    jobs = [_submit(alice, time_limit_s=60) for _ in range(6)]
    for job in jobs:
        _past_deadline(job)
    calls = iter([lambda: cancel_late_starts(now=timezone.now()),
                  *[lambda job=job: job_cancel(job=job) for job in jobs[::2]]])
    race(lambda: next(calls)(), 4)
    for job in jobs:
        job.refresh_from_db()
        assert job.state == "CANCELLED"
        assert job.events.filter(to_state="CANCELLED").count() == 1
    assert wallet_of(alice).available == 1_000
    assert_ledger_consistent()


@pytest.mark.parametrize("within", [0, -5, 30 * 86_400 + 1, "soon", 1.5])
def test_a_deadline_out_of_range_is_a_400_and_queues_nothing(api, within):
    answer = api.post("/api/v1/jobs", {"prompt": "a heron", "start_within_s": within},
                      format="json")
    assert answer.status_code == 400 and "start_within_s" in answer.json()["error"]["fields"]
    assert Job.objects.count() == 0


def test_the_api_takes_and_shows_the_deadline_and_a_retry_finds_its_job(api, alice):
    sent = {"prompt": "a heron", "start_within_s": 120}
    made = api.post("/api/v1/jobs", sent, format="json", HTTP_IDEMPOTENCY_KEY="k1").json()
    shown = api.get(made["url"]).json()
    assert shown["start_by"] is not None
    again = api.post("/api/v1/jobs", sent, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert again["Idempotent-Replayed"] == "true" and again.json()["id"] == made["id"]
    other = api.post("/api/v1/jobs", {**sent, "start_within_s": 60}, format="json",
                     HTTP_IDEMPOTENCY_KEY="k1")
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    # a request without a deadline prints as requests did before deadlines existed
    _, replayed = job_submit_once(organization=alice, spec=JobSpec(prompt="x"),
                                  idempotency_key="k2")
    assert not replayed and Job.objects.get(idempotency_key="k2").start_by is None


def test_a_job_estimated_to_start_past_its_deadline_says_so_while_it_waits(api, alice):
    made = api.post("/api/v1/jobs", {"prompt": "a heron", "start_within_s": 60},
                    format="json").json()
    waiting = api.get(made["url"]).json()["pending"]
    assert waiting["misses_start_deadline"] is False  # no estimate yet
    job = Job.objects.get(pk=made["id"])
    Job.objects.filter(pk=job.pk).update(estimated_start=job.start_by + timedelta(minutes=5))
    assert api.get(made["url"]).json()["pending"]["misses_start_deadline"] is True
    member = Client()
    member.force_login(make_member(alice, "mia"))
    page = member.get(f"/dashboard/jobs/{job.pk}").content.decode()
    assert "its estimated start is later" in page
    Job.objects.filter(pk=job.pk).update(estimated_start=job.start_by - timedelta(seconds=5))
    assert api.get(made["url"]).json()["pending"]["misses_start_deadline"] is False
