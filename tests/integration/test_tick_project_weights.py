"""Projects share their organization's GPUs by the weights operators give them."""

import pytest

from jobs.models import Project
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_node, started_projects, submit_alternating

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_project_of_weight_three_gets_three_times_the_gpus(alice):
    Project.objects.create(organization=alice, name="heavy", weight=3.0)
    Project.objects.create(organization=alice, name="light")
    make_node("n1", gpus=8)
    submit_alternating(alice, ("heavy", "light"), 32)
    scheduler_tick_run()
    assert started_projects() == ["heavy"] * 6 + ["light"] * 2
