"""The black box misbehaves: a failure another try may not repeat is retried and, past the
retries, dead-lettered; one that would repeat ends the job; every code right, GPUs freed."""

import uuid

import pytest

from jobs.models import Attempt, GpuBinding, Job
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_job
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CASES = [
    # (params, job state, error code, attempt outcomes, error codes of the retried tries)
    ({"fail": "crash", "fail_tries": 1}, "SUCCEEDED", "", ["FAILED", "SUCCEEDED"], ["exit_1"]),
    ({"fail": "crash"}, "DEAD", "retries_exhausted", ["FAILED", "FAILED"], ["exit_1"]),
    ({"fail": "oom"}, "FAILED", "out_of_memory", ["OOM"], []),  # no GPU has more memory
    ({"fail": "corrupt"}, "DEAD", "retries_exhausted", ["FAILED", "FAILED"],
     ["corrupt_output"]),
    ({"fail": "hang"}, "DEAD", "retries_exhausted", ["FAILED", "FAILED"], ["hung"]),
    ({"fail": "bogus"}, "FAILED", "exit_2", ["FAILED"], []),  # a bad parameter: usage error
    ({"run_seconds": 30}, "TIMED_OUT", "time_limit", ["TIMED_OUT"], []),
]


def test_crash_oom_corrupt_hang_bad_input_and_timeout(alice):
    purge_broker_and_cache()
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5", GPUSCHED_HANG_TIMEOUT_S="2",
                         GPUSCHED_KILL_GRACE_S="1", GPUSCHED_MAX_RETRIES="1",
                         GPUSCHED_RETRY_BACKOFF_S="0.2")
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
    for job, (params, state, code, outcomes, retried) in zip(jobs, CASES, strict=True):
        job.refresh_from_db()
        tries = Attempt.objects.filter(job=job).order_by("pk")
        events = job.events.filter(to_state="RETRY_WAIT")
        assert (job.state, job.error_code) == (state, code), params
        assert [a.outcome for a in tries] == outcomes, params
        assert sorted({e.data["error_code"] for e in events}) == retried, params
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    assert "out of memory" in Job.objects.get(pk=jobs[2].pk).error
    assert "SimulatedCrash" in Job.objects.get(pk=jobs[1].pk).error  # the last try's stderr
