"""A running job's node keeps the time limit the service holds now: one an operator
lengthens runs to its end, one its client shortens is stopped at the shorter limit."""

import uuid

import pytest

from jobs.models import Job
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


def test_a_node_stops_its_job_at_the_limit_set_while_it_ran(api, quick_heartbeats):
    purge_broker_and_cache()
    name = f"limit-{uuid.uuid4().hex[:6]}"
    quick_heartbeats.node(name, 2)
    wait_for(lambda: Node.objects.filter(name=name).exists(), 60, "the node")
    quick_heartbeats.scheduler()

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
