"""The tick loads the queue in the order the policy walks a project: by virtual deadline."""

import pytest

from jobs.models import Job
from jobs.scheduler.snapshot import load_queued
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_node


def _submit(org, limit: int) -> int:
    return job_submit(organization=org, spec=JobSpec(prompt="a cat", gpus=1,
                                                     time_limit_s=limit)).pk


@pytest.mark.django_db
def test_a_shorter_job_submitted_later_loads_first(alice):
    long, short = _submit(alice, 3600), _submit(alice, 60)
    assert [j.job_id for j in load_queued(limit_weight=10.0)] == [short, long]
    assert [j.job_id for j in load_queued(limit_weight=0.0)] == [long, short]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("weight,starts", [(10.0, "short"), (0.0, "long")])
def test_the_limit_weight_setting_reaches_the_tick(alice, settings, weight, starts):
    settings.GPUSCHED_LIMIT_WEIGHT = weight
    make_node("n1", gpus=1)
    jobs = {"long": _submit(alice, 3600), "short": _submit(alice, 60)}
    scheduler_tick_run()
    assert Job.objects.get(pk=jobs[starts]).state == "SCHEDULED"
