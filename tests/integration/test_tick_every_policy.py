"""The tick runs whichever policy the operator configures (GPUSCHED_POLICY), on the
snapshot the database gives, usage accounts per project and user included."""

import pytest
from django.utils import timezone

from jobs.models import Job, Project, UsageAccount
from jobs.policy import POLICIES
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_node, started_projects, submit_alternating

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_places_and_explains_on_a_real_snapshot(alice, settings, policy):
    settings.GPUSCHED_POLICY = policy
    heavy = Project.objects.create(organization=alice, name="heavy")
    Project.objects.create(organization=alice, name="light")
    UsageAccount.objects.create(project=heavy, gpu_seconds=1e6, as_of=timezone.now())
    make_node("n1", gpus=4)
    submit_alternating(alice, ("heavy", "light"), 8)
    scheduler_tick_run()
    started = started_projects()
    waiting = Job.objects.filter(state="QUEUED")
    assert len(started) == 4 and waiting.count() == 4
    assert all(job.pending_code for job in waiting)
    if policy in ("gpusched", "multifactor"):  # fair share: the project that used nothing
        assert started == ["light"] * 4
