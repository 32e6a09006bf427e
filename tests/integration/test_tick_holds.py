"""A gang's reservation outlives the tick that made it: what it drains is not refilled."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from jobs.models import Attempt, Job
from jobs.scheduler.holds import HOLDS_KEY
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.tenancy import organization_create
from tests.support.factories import make_job, make_node
from workers.services.attempts import AttemptResult, attempt_finish, attempt_start

pytestmark = pytest.mark.django_db(transaction=True)


def _start_all() -> None:
    for attempt in Attempt.objects.filter(started_at__isnull=True, ended_at__isnull=True):
        attempt_start(attempt_id=attempt.pk, token=attempt.token)


def _finish(job: Job) -> None:
    attempt = Attempt.objects.get(job=job, ended_at__isnull=True)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("SUCCEEDED", 0))


@pytest.fixture
def draining(alice):
    """n1 runs four 1-GPU jobs; bob's 4-GPU gang waits and reserves n1; one job ends."""
    cache.delete(HOLDS_KEY)
    make_node("n1", gpus=4)
    make_node("n2", gpus=1)
    bob = organization_create(slug="bob-paid", tier="paid")
    busy = make_job(bob, gpus=1)  # best fit puts it on n2; it raises bob's share over carol's
    scheduler_tick_run()
    ones = [make_job(alice, gpus=1) for _ in range(4)]
    scheduler_tick_run()
    _start_all()
    assert set(Attempt.objects.values_list("node__name", flat=True)) == {"n1", "n2"}
    gang = make_job(bob, gpus=4)
    # past its tier's start SLO: from then on its reservation is kept ahead of the walk
    Job.objects.filter(pk=gang.pk).update(enqueued_at=timezone.now() - timedelta(minutes=10))
    scheduler_tick_run()
    gang.refresh_from_db()
    assert gang.state == "QUEUED" and "reserved n1" in gang.pending_reason
    _finish(ones[0])
    single = make_job(organization_create(slug="carol", tier="paid"), gpus=1)
    return {"gang": gang, "single": single, "others": ones[1:], "busy": busy}


def test_the_freed_gpu_stays_with_the_gang_across_ticks(draining):
    scheduler_tick_run()  # carol's job ranks ahead of bob's gang but must not refill n1
    single = Job.objects.get(pk=draining["single"].pk)
    assert single.state == "QUEUED"
    assert Job.objects.get(pk=draining["gang"].pk).state == "QUEUED"
    for job in draining["others"]:
        _finish(job)
    scheduler_tick_run()
    gang = Job.objects.get(pk=draining["gang"].pk)
    assert gang.state == "SCHEDULED"
    assert Attempt.objects.get(job=gang).node.name == "n1"


def test_without_the_kept_reservation_the_freed_gpu_is_refilled(draining):
    cache.delete(HOLDS_KEY)  # what the policy did before reservations were carried over
    scheduler_tick_run()
    assert Job.objects.get(pk=draining["single"].pk).state == "SCHEDULED"
