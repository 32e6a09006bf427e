"""A running job changed while it runs, by its client or an operator: held, its node stops
the binary at a checkpoint, the GPUs go to other work meanwhile, and released it resumes
where it stopped; its time limit changed, its node keeps the new one, longer or shorter."""

import uuid

import pytest

from jobs.models import Attempt, GpuBinding, Job
from jobs.services.time_limits import job_set_time_limit
from tests.support.broker import purge_broker_and_cache
from tests.support.processes import ProcessGroup, wait_for
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def quick_heartbeats():
    group = ProcessGroup(GPUSCHED_HEARTBEAT_SECONDS="0.5")
    yield group
    group.stop_all()


def _state(job_id: int) -> str:
    return Job.objects.get(pk=job_id).state


def _fleet(group: ProcessGroup, gpus: int) -> None:
    """One node of `gpus` and the scheduler."""
    purge_broker_and_cache()
    name = f"run-{uuid.uuid4().hex[:6]}"
    group.node(name, gpus)
    wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "the node")
    group.scheduler()


def test_a_held_running_job_frees_its_gpus_and_resumes_once_released(api, quick_heartbeats):
    _fleet(quick_heartbeats, 1)
    job_id = api.post("/api/v1/jobs", {
        "prompt": "a training run", "checkpointable": True,
        "params": {"run_seconds": 12, "progress_interval": 0.25}}, format="json").json()["id"]
    wait_for(lambda: _state(job_id) == "RUNNING", 60, "the job to run")
    wait_for(lambda: Attempt.objects.get(job_id=job_id).progress > 0.1, 30, "some progress")

    asked = api.post(f"/api/v1/jobs/{job_id}/hold")
    assert asked.status_code == 202 and asked.json()["hold"] == "client"
    wait_for(lambda: _state(job_id) == "HELD", 30, "the job to stop and be held")
    first = Attempt.objects.get(job_id=job_id)
    assert (first.outcome, first.exit_code) == (Attempt.Outcome.PREEMPTED, 75)
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()

    other = api.post("/api/v1/jobs", {"prompt": "a short clip", "params": {"run_seconds": 1}},
                     format="json").json()["id"]
    wait_for(lambda: _state(other) == "SUCCEEDED", 60, "other work on the freed GPU")
    assert _state(job_id) == "HELD"  # no round took it back meanwhile

    assert api.post(f"/api/v1/jobs/{job_id}/release").json()["state"] == "QUEUED"
    wait_for(lambda: Attempt.objects.filter(job_id=job_id).count() == 2, 30, "a second try")
    resumed = Attempt.objects.filter(job_id=job_id).latest("id")
    wait_for(lambda: Attempt.objects.get(pk=resumed.pk).progress > 0, 30, "a heartbeat")
    # it picked up where it stopped, not from zero
    assert Attempt.objects.get(pk=resumed.pk).progress >= first.progress > 0.1
    wait_for(lambda: _state(job_id) == "SUCCEEDED", 90, "the job to finish")
    assert Job.objects.get(pk=job_id).preemptions == 0


def test_a_node_stops_its_job_at_the_limit_set_while_it_ran(api, quick_heartbeats):
    _fleet(quick_heartbeats, 2)

    def submit(run_s: int, limit_s: int) -> int:
        return api.post("/api/v1/jobs", {"prompt": "a run", "time_limit_s": limit_s,
                                         "params": {"run_seconds": run_s}},
                        format="json").json()["id"]

    longer, shorter = submit(8, 5), submit(60, 600)
    wait_for(lambda: _state(longer) == _state(shorter) == "RUNNING", 60, "both to run")
    job_set_time_limit(job=Job.objects.get(pk=longer), time_limit_s=120, by="op",
                       operator=True)
    cut = api.patch(f"/api/v1/jobs/{shorter}", {"time_limit_s": 4}, format="json")
    assert cut.status_code == 200
    wait_for(lambda: _state(shorter) == "TIMED_OUT", 60, "the shortened job to stop")
    wait_for(lambda: _state(longer) == "SUCCEEDED", 60, "the lengthened job to finish")
