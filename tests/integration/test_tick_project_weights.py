"""Projects share their organization's GPUs by the weights operators give them."""

import pytest

from jobs.models import Job, Project
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_node

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_project_of_weight_three_gets_three_times_the_gpus(alice):
    Project.objects.create(organization=alice, name="heavy", weight=3.0)
    Project.objects.create(organization=alice, name="light")
    make_node("n1", gpus=8)
    for i in range(32):
        job_submit(organization=alice,
                   spec=JobSpec(prompt="a cat", gpus=1, project=("heavy", "light")[i % 2]))
    scheduler_tick_run()
    started = Job.objects.filter(state="SCHEDULED").values_list("project__name", flat=True)
    assert sorted(started) == ["heavy"] * 6 + ["light"] * 2
