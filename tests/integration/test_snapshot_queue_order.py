"""The tick loads the queue as the policy needs it: every field, by virtual deadline."""

import sys

import pytest

from jobs.models import Job
from jobs.policy.deadlines import in_deadline_order
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


@pytest.mark.django_db
@pytest.mark.parametrize("estimate,seconds", [(None, None), (90, 90.0), ("120", 120.0),
                                              ("soon", None), (-5, None), ({"s": 1}, None)])
def test_a_queued_job_loads_with_its_spec(alice, estimate, seconds):
    params = {} if estimate is None else {"expected_duration_s": estimate}
    spec = JobSpec(prompt="a cat", gpus=2, params=params, gpu_types=("A100", "H100"),
                   min_gpu_memory_mb=40_000, region="eu", time_limit_s=600,
                   checkpointable=True)
    pk = job_submit(organization=alice, spec=spec).pk
    plain = job_submit(organization=alice, spec=JobSpec(prompt="a dog")).pk
    loaded = {j.job_id: j for j in load_queued()}
    job = loaded[pk]
    assert (job.org, job.tier, job.project, job.gpus, job.time_limit_s) == (
        "alice", "paid", "default", 2, 600.0)
    assert job.expected_duration_s == seconds
    assert job.gpu_types == ("A100", "H100") and loaded[plain].gpu_types == ()
    assert (job.min_gpu_memory_mb, job.region, job.checkpointable) == (40_000, "eu", True)
    assert job.enqueued_at == pytest.approx(Job.objects.get(pk=pk).enqueued_at.timestamp())


@pytest.mark.django_db
def test_the_queue_loads_in_the_policys_order_with_names_interned(alice):
    for limit in (3600, 60, 600, 60, 7200, 600):
        _submit(alice, limit)
    loaded = load_queued(limit_weight=10.0)
    assert [j.job_id for j in loaded] == [j.job_id for j in in_deadline_order(loaded, 10.0)]
    assert [j.job_id for j in loaded] != sorted(j.job_id for j in loaded)  # not arrival order
    # the round groups the queue by these names: one object per name, not one per row
    assert all(j.org is sys.intern("alice") and j.project is sys.intern("default")
               for j in loaded)
