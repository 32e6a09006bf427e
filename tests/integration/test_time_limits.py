"""A started job's time limit changes as Slurm's `scontrol update TimeLimit=` changes it: an
operator lengthens or shortens it, its client only shortens it, and its running try's nodes
learn the new limit at their next heartbeat. Attacked: a client lengthening it, a limit the
try has passed, one the credits do not cover, an ended job, a wallet expired under its
holds, and changes racing the try's metering and end (invariant: the limit changes with its
credits or not at all, never fails a try's report, and the job pays what it ran, once)."""

from datetime import timedelta
from functools import partial

import pytest
from django.db import transaction
from django.utils import timezone

from credits.errors import InsufficientCredits
from credits.models import Account, GpuPrice
from credits.services.grants import credits_grant
from credits.services.holds import job_credits, meter_attempt
from jobs.models import Attempt, Job
from jobs.services.submission import JobSpec, job_submit
from jobs.services.time_limits import job_set_time_limit
from tests.support.factories import make_node, start_placed
from tests.support.ledger import assert_ledger_consistent, wallet_of
from tests.support.race import race
from workers.services.attempts import AttemptResult, attempt_finish, attempt_heartbeat

pytestmark = pytest.mark.django_db(transaction=True)


def _job(pk: int) -> Job:
    return Job.objects.get(pk=pk)


def _running(org, limit: int = 600) -> tuple[Job, Attempt]:
    job = job_submit(organization=org, spec=JobSpec(prompt="a training run",
                                                    time_limit_s=limit))
    return job, start_placed(job)


def test_an_operator_lengthens_a_running_job_and_its_node_learns_the_limit(alice):
    make_node(gpus=1)
    job, attempt = _running(alice)
    assert attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token).time_limit_s == 600
    job_set_time_limit(job=job, time_limit_s=7200, by="op", operator=True)
    assert _job(job.pk).time_limit_s == 7200
    assert attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token).time_limit_s == 7200
    event = _job(job.pk).events.latest("pk")
    assert (event.from_state, event.to_state, event.data["changed"]) == (
        "RUNNING", "RUNNING", {"time_limit_s": [600, 7200]})


def test_a_client_shortens_its_running_job_but_does_not_lengthen_it(api, alice):
    make_node(gpus=1)
    job, _ = _running(alice)
    shorter = api.patch(f"/api/v1/jobs/{job.pk}", {"time_limit_s": 300}, format="json")
    assert (shorter.status_code, shorter.json()["time_limit_s"]) == (200, 300)
    longer = api.patch(f"/api/v1/jobs/{job.pk}", {"time_limit_s": 900}, format="json")
    assert longer.status_code == 403
    assert longer.json()["error"]["code"] == "time_limit_extension_not_allowed"
    Attempt.objects.filter(job=job).update(started_at=timezone.now() - timedelta(seconds=200))
    passed = api.patch(f"/api/v1/jobs/{job.pk}", {"time_limit_s": 100}, format="json")
    assert (passed.status_code, passed.json()["error"]["code"]) == (400, "time_limit_passed")
    assert _job(job.pk).time_limit_s == 300
    waiting = job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=60))
    lengthened = api.patch(f"/api/v1/jobs/{waiting.pk}", {"time_limit_s": 900}, format="json")
    assert lengthened.json()["time_limit_s"] == 900  # not placed yet: its request changes


def test_a_longer_limit_holds_what_it_may_cost_more_or_changes_nothing(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=1000)
    make_node(gpus=1)
    job, _ = _running(alice)
    job_set_time_limit(job=job, time_limit_s=900, by="op", operator=True)
    assert job_credits(_job(job.pk))["held"] == 900 and wallet_of(alice).available == 100
    with pytest.raises(InsufficientCredits):
        job_set_time_limit(job=_job(job.pk), time_limit_s=1200, by="op", operator=True)
    assert _job(job.pk).time_limit_s == 900 and job_credits(_job(job.pk))["held"] == 900
    job_set_time_limit(job=_job(job.pk), time_limit_s=300, by="op", operator=True)
    assert job_credits(_job(job.pk))["held"] == 300  # a shorter one gives back at once
    assert wallet_of(alice).available == 700
    assert_ledger_consistent()


def test_a_shorter_limit_keeps_what_the_job_may_still_cost_beside_what_it_spent(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=1000)
    make_node(gpus=1)
    job, attempt = _running(alice)  # holds 600
    checkpointed = timezone.now() - timedelta(seconds=200)
    Attempt.objects.filter(pk=attempt.pk).update(started_at=checkpointed - timedelta(
        seconds=100))
    with transaction.atomic():
        meter_attempt(attempt.pk, until=checkpointed)  # 100 s kept: spent
    job_set_time_limit(job=_job(job.pk), time_limit_s=400, by="client")
    credits = job_credits(_job(job.pk))
    assert (credits["spent"], credits["held"]) == (100, 300)  # never past its most, 400
    assert wallet_of(alice).available == 600
    finished = attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                              result=AttemptResult("SUCCEEDED", 0))
    assert finished.state == "SUCCEEDED"
    credits = job_credits(_job(job.pk))
    assert credits["held"] == 0 and 300 <= credits["spent"] <= 305  # the 300 s it ran
    assert wallet_of(alice).available == 1000 - credits["spent"]
    assert_ledger_consistent()


def test_an_ended_job_or_a_limit_out_of_range_is_refused(api, alice):
    make_node(gpus=1)
    job, attempt = _running(alice)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("SUCCEEDED", 0))
    ended = api.patch(f"/api/v1/jobs/{job.pk}", {"time_limit_s": 60}, format="json")
    assert (ended.status_code, ended.json()["error"]["code"]) == (409, "job_finished")
    other, _ = _running(alice)
    huge = api.patch(f"/api/v1/jobs/{other.pk}", {"time_limit_s": 10**9}, format="json")
    assert huge.status_code == 400 and _job(other.pk).time_limit_s == 600


def test_an_operator_changes_the_limit_from_admin(client, alice):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("op", password="pw-op-1"))
    make_node(gpus=1)
    job, _ = _running(alice)
    client.post("/admin/jobs/job/", {"action": "change_time_limit", "apply": "Change",
                                     "_selected_action": [job.pk], "hours": "2"})
    assert _job(job.pk).time_limit_s == 7200
    huge = client.post("/admin/jobs/job/", {"action": "change_time_limit", "apply": "Change",
                                            "_selected_action": [job.pk], "hours": "1e306"})
    assert huge.status_code == 200 and _job(job.pk).time_limit_s == 7200  # asked again


def test_a_change_racing_the_tries_end_never_fails_its_report(alice):
    make_node(gpus=2)
    for _ in range(4):
        job, attempt = _running(alice)
        errors = race(partial(job_set_time_limit, job=job, time_limit_s=1200, by="op",
                              operator=True),
                      partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                              result=AttemptResult("SUCCEEDED", 0)))
        assert all(getattr(e, "code", "") == "job_finished" for e in errors), errors
        assert _job(job.pk).state == "SUCCEEDED"


def test_a_shorter_limit_gives_nothing_back_where_only_an_expired_wallet_held_it(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    soon = timezone.now() + timedelta(minutes=5)
    credits_grant(organization=alice, amount=600, promo=True, expires_at=soon)
    make_node(gpus=1)
    job, _ = _running(alice)  # its 600 held in the promotional bucket
    Account.objects.filter(expires_at=soon).update(expires_at=timezone.now())
    job_set_time_limit(job=_job(job.pk), time_limit_s=300, by="client")
    assert _job(job.pk).time_limit_s == 300  # shorter still: the credits settle at the end
    assert job_credits(_job(job.pk))["held"] == 600
    assert_ledger_consistent()


def test_shortenings_racing_metering_and_the_end_keep_the_ledger_and_the_most(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=100_000)
    make_node(gpus=2)
    for shorter in (400, 350, 300, 250):
        job, attempt = _running(alice)  # holds 600
        Attempt.objects.filter(pk=attempt.pk).update(
            started_at=timezone.now() - timedelta(seconds=200))
        beat = partial(attempt_heartbeat, attempt_id=attempt.pk, token=attempt.token,
                       checkpointed=True)
        shorten = partial(job_set_time_limit, job=job, time_limit_s=shorter, by="client")
        end = partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                      result=AttemptResult("SUCCEEDED", 0))
        errors = race(shorten, beat, beat, end)
        assert all(getattr(e, "code", "") == "job_finished" for e in errors), errors
        job = _job(job.pk)
        credits = job_credits(job)
        assert job.state == "SUCCEEDED" and credits["held"] == 0
        assert 200 <= credits["spent"] <= 205  # what it ran, once, whoever went first
        assert_ledger_consistent()


def _spent_then_shortened_to_nothing(alice) -> tuple[Job, Attempt]:
    """A running job that has spent 500 of its 600 and is shortened to 400: it keeps no
    hold open, what it spent past its new most stays spent."""
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=10_000)
    make_node(gpus=1)
    job, attempt = _running(alice)
    kept = timezone.now() - timedelta(seconds=5)
    Attempt.objects.filter(pk=attempt.pk).update(started_at=kept - timedelta(seconds=500))
    with transaction.atomic():
        meter_attempt(attempt.pk, until=kept)
    Attempt.objects.filter(pk=attempt.pk).update(started_at=timezone.now() - timedelta(
        seconds=300))  # its try has run less than the new limit, so it may be shortened
    job_set_time_limit(job=_job(job.pk), time_limit_s=400, by="client")
    assert job_credits(_job(job.pk)) == {"held": 0, "spent": 500, "refunded": 0}
    return _job(job.pk), attempt


def test_a_longer_limit_after_a_shorter_one_left_nothing_held_holds_again(alice):
    job, _ = _spent_then_shortened_to_nothing(alice)
    job_set_time_limit(job=job, time_limit_s=7200, by="op", operator=True)
    assert job_credits(_job(job.pk))["held"] == 7200 - 500  # its most, less what it spent
    assert wallet_of(alice).available == 10_000 - 7200
    assert_ledger_consistent()


def test_a_job_that_fails_after_a_shorter_limit_is_refunded_all_it_spent(alice):
    job, attempt = _spent_then_shortened_to_nothing(alice)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("FAILED", 1))
    assert _job(job.pk).state == "FAILED"
    assert job_credits(_job(job.pk)) == {"held": 0, "spent": 0, "refunded": 500}
    assert wallet_of(alice).available == 10_000
    assert_ledger_consistent()


def test_a_job_waiting_for_another_holds_more_for_a_longer_limit(alice):
    """It has never started, so its client may lengthen it; waiting HELD for the job it runs
    after, it still holds its credits, and must hold what the longer limit may cost too."""
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=10_000)
    first = job_submit(organization=alice, spec=JobSpec(prompt="a", time_limit_s=60))
    after = job_submit(organization=alice, spec=JobSpec(prompt="b", time_limit_s=60,
                                                        after=(first.pk,)))
    assert after.state == "HELD" and job_credits(after)["held"] == 60
    job_set_time_limit(job=after, time_limit_s=3600, by="client")
    assert _job(after.pk).time_limit_s == 3600 and job_credits(_job(after.pk))["held"] == 3600
    assert wallet_of(alice).available == 10_000 - 60 - 3600
    assert_ledger_consistent()
