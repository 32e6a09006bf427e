"""GPUs being freed by preemption are promised to one job; nobody preempts for it twice."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Attempt, Job, Tier
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.tenancy import organization_create
from tests.support.factories import make_job, make_node
from workers.services.attempts import attempt_start

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_victim_per_preemptor_across_ticks(bob, settings):
    settings.GPUSCHED_PREEMPT_MIN_RUNTIME_S = 0
    Tier.objects.filter(name="free").update(guaranteed_share=0)
    make_node("n1", gpus=2)
    make_node("n2", gpus=2)
    free_jobs = [make_job(bob, gpus=2) for _ in range(2)]
    # checkpointable victims get a long grace, so their GPUs stay busy across ticks
    Job.objects.update(checkpointable=True)
    scheduler_tick_run()
    for attempt in Attempt.objects.all():
        attempt_start(attempt_id=attempt.pk, token=attempt.token)
    Attempt.objects.update(started_at=timezone.now() - timedelta(minutes=5))

    urgent = make_job(organization_create(slug="carol", tier="enterprise"), gpus=2)
    for _ in range(3):
        scheduler_tick_run()
    states = sorted(Job.objects.filter(pk__in=[j.pk for j in free_jobs])
                    .values_list("state", flat=True))
    assert states == ["PREEMPTING", "RUNNING"]
    victim = Attempt.objects.get(stop_requested="preempt")
    assert victim.preempted_for_id == urgent.pk
    urgent.refresh_from_db()
    assert urgent.state == "QUEUED" and urgent.pending_code == "preempting"
