"""GPUSCHED_STARVE_AFTER_S reaches the tick: a starving job goes before fair share."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.tenancy import organization_create
from tests.support.factories import make_job, make_node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def contest(tiers):
    """bob runs a job (his share is above carol's); his old job and carol's new one want n1."""
    make_node("n2", gpus=1)
    bob = organization_create(slug="bob-paid", tier="paid")
    make_job(bob, gpus=1)
    scheduler_tick_run()  # bob's first job takes n2
    make_node("n1", gpus=1)
    old = make_job(bob, gpus=1)
    Job.objects.filter(pk=old.pk).update(enqueued_at=timezone.now() - timedelta(hours=3))
    new = make_job(organization_create(slug="carol", tier="paid"), gpus=1)
    return old, new


def _states(*jobs: Job) -> list[str]:
    return [Job.objects.get(pk=j.pk).state for j in jobs]


def test_fair_share_alone_serves_the_lighter_org(contest, settings):
    settings.GPUSCHED_STARVE_AFTER_S = 0
    scheduler_tick_run()
    assert _states(*contest) == ["QUEUED", "SCHEDULED"]


def test_a_job_queued_past_the_starvation_limit_goes_first(contest, settings):
    settings.GPUSCHED_STARVE_AFTER_S = 3600
    scheduler_tick_run()
    assert _states(*contest) == ["SCHEDULED", "QUEUED"]
