"""The tick loads the queue in the order the policy walks a project: by virtual deadline."""

import pytest

from jobs.scheduler.snapshot import load_queued
from jobs.services.submission import JobSpec, job_submit

pytestmark = pytest.mark.django_db


def _submit(org, limit: int) -> int:
    return job_submit(organization=org, spec=JobSpec(prompt="a cat", gpus=1,
                                                     time_limit_s=limit)).pk


def test_a_shorter_job_submitted_later_loads_first(alice):
    long, short = _submit(alice, 3600), _submit(alice, 60)
    assert [j.job_id for j in load_queued(limit_weight=10.0)] == [short, long]
    assert [j.job_id for j in load_queued(limit_weight=0.0)] == [long, short]
