"""A gang larger than every node, on nodes that name no island (none shares a gang with
another: tests/integration/test_gang_across_nodes.py), waits with a reason instead of being
placed and refused at every tick."""

import pytest

from jobs.models import Attempt
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_gang_larger_than_every_node_gets_a_reason_not_a_placement(alice):
    make_node("n1", gpus=4)
    make_node("n2", gpus=4)
    gang = make_job(alice, gpus=8)
    report = scheduler_tick_run()
    assert report.applied.refused == 0 and report.applied.placed == 0
    gang.refresh_from_db()
    assert gang.state == "QUEUED" and gang.pending_code == "no_fit"
    assert not Attempt.objects.exists()


def test_smaller_jobs_still_start_beside_it(alice):
    make_node("n1", gpus=4)
    make_job(alice, gpus=8)
    small = make_job(alice, gpus=4)
    scheduler_tick_run()
    small.refresh_from_db()
    assert small.state == "SCHEDULED"
