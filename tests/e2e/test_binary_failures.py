"""The black box misbehaves: each failure ends the job with the right code, GPUs freed."""

import uuid

import pytest

from jobs.models import Attempt, GpuBinding, Job
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CASES = [
    # (params, job state, attempt outcome, error code)
    ({"fail": "crash"}, "FAILED", "FAILED", "exit_1"),
    ({"fail": "oom"}, "FAILED", "OOM", "out_of_memory"),
    ({"fail": "corrupt"}, "FAILED", "FAILED", "corrupt_output"),
    ({"fail": "hang"}, "FAILED", "FAILED", "hung"),
    ({"run_seconds": 30}, "TIMED_OUT", "TIMED_OUT", "time_limit"),
]


def test_crash_oom_corrupt_hang_and_timeout(alice):
    purge_broker_and_cache()
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5", GPUSCHED_HANG_TIMEOUT_S="2",
                         GPUSCHED_KILL_GRACE_S="1")
    try:
        name = f"fail-{uuid.uuid4().hex[:6]}"
        group.node(name, len(CASES))
        wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "the node")
        group.scheduler()
        base = {"run_seconds": 2, "progress_interval": 0.25, "fail_at": 0.25}
        jobs = [make_job(alice, **{**base, **params}) for params, *_ in CASES]
        Job.objects.filter(pk=jobs[-1].pk).update(time_limit_s=2)
        wait_for(lambda: Job.objects.filter(pk__in=[j.pk for j in jobs], finished_at__isnull=False
                                            ).count() == len(CASES), 90, "every job to end")
    finally:
        group.stop_all()
    for job, (params, state, outcome, code) in zip(jobs, CASES, strict=True):
        job.refresh_from_db()
        attempt = Attempt.objects.get(job=job)
        assert (job.state, attempt.outcome, job.error_code) == (state, outcome, code), params
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    assert "out of memory" in Job.objects.get(pk=jobs[1].pk).error
