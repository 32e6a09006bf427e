"""Twenty jobs travel from the API through beat, the tick and two real node workers; the last
five each run after one of the first five."""

import random
import threading
import time
import uuid

import pytest
from django.core.files.storage import default_storage
from django.db import connection
from django.db.models import Count

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from credits.services.pricing import cost
from jobs.models import Attempt, GpuBinding, Job
from tests.support.broker import purge_broker_and_cache
from tests.support.ledger import assert_ledger_consistent
from tests.support.processes import wait_for
from workers.fakegen.video import validate_y4m
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

EXPECTED_PATH = ["QUEUED", "SCHEDULED", "RUNNING", "SUCCEEDED"]


class DoubleBindingSampler(threading.Thread):
    """Reads the live bindings from the database while the fleet works."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.samples = 0
        self.violations: list[tuple] = []

    def run(self) -> None:
        try:
            while not self.stop.wait(0.05):
                doubled = (GpuBinding.objects.filter(released_at__isnull=True)
                           .values("gpu_id").annotate(n=Count("id")).filter(n__gt=1))
                self.violations.extend(tuple(d.values()) for d in doubled)
                self.samples += 1
        finally:
            connection.close()


def _bindings_never_overlap() -> None:
    """After the run: on every GPU, one binding ends before the next begins."""
    by_gpu: dict[int, list] = {}
    for b in GpuBinding.objects.order_by("gpu_id", "bound_at"):
        by_gpu.setdefault(b.gpu_id, []).append(b)
    for bindings in by_gpu.values():
        for earlier, later in zip(bindings, bindings[1:], strict=False):
            assert earlier.released_at is not None and earlier.released_at <= later.bound_at


def _history(job: Job, processes) -> str:
    """What a job went through, for a failure message: its events, attempts and the logs."""
    events = job.events.order_by("version").values_list("at", "from_state", "to_state", "reason")
    attempts = job.attempts.order_by("pk").values_list(
        "pk", "node__name", "created_at", "started_at", "ended_at", "outcome", "exit_code")
    return f"job {job.pk}\n{list(events)}\n{list(attempts)}\n{processes.logs()}"


def test_twenty_jobs_reach_succeeded_on_two_nodes(api, alice, processes):
    purge_broker_and_cache()
    suffix = uuid.uuid4().hex[:6]
    small, large = f"e2e-small-{suffix}", f"e2e-large-{suffix}"
    processes.node(small, 2)
    processes.node(large, 4)
    wait_for(lambda: Node.objects.filter(name__in=[small, large]).count() == 2, 90, "nodes")
    processes.scheduler()
    # they pay as they go: two real nodes meter and settle at once (invariant 5)
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=36_000)
    credits_grant(organization=alice, amount=10**7)

    sampler = DoubleBindingSampler()
    sampler.start()
    rng = random.Random(7)
    ids = []
    for i in range(20):
        body = {"prompt": f"scene {i}: a lighthouse at dusk", "gpus": rng.choice([1, 2, 3, 4]),
                "params": {"run_seconds": rng.choice([0.5, 1.0, 1.5]),
                           "progress_interval": 0.25, "seed": i},
                "after": [ids[i - 15]] if i >= 15 else []}
        response = api.post("/api/v1/jobs", body, format="json")
        assert response.status_code == 202, response.content
        ids.append(response.json()["id"])
    started = time.monotonic()
    try:
        wait_for(lambda: Job.objects.filter(pk__in=ids, state="SUCCEEDED").count() == 20,
                 240, "all 20 jobs to succeed")
    except AssertionError:
        states = list(Job.objects.filter(pk__in=ids).values_list("id", "state", "error"))
        raise AssertionError(f"{states}\n{processes.logs()}") from None
    finally:
        sampler.stop.set()
        sampler.join()
    print(f"20 jobs done in {time.monotonic() - started:.1f}s; {sampler.samples} samples")

    assert sampler.samples > 10 and sampler.violations == []
    _bindings_never_overlap()
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    for job in Job.objects.filter(pk__in=ids):
        assert job.attempts.count() == 1, _history(job, processes)
        attempt = job.attempts.get()
        assert attempt.outcome == Attempt.Outcome.SUCCEEDED and attempt.exit_code == 0
        assert len(attempt.gpu_indices) == job.gpus
        assert attempt.node.name == large or job.gpus <= 2
        path = [e.to_state for e in job.events.all()]
        if job.pk in ids[15:]:  # held until the job it runs after succeeded, unless it had
            first = Job.objects.get(pk=ids[ids.index(job.pk) - 15])
            assert attempt.created_at >= first.finished_at, _history(job, processes)
            path = path[1:] if path[0] == "HELD" else path
        assert path == EXPECTED_PATH, _history(job, processes)
        assert default_storage.exists(job.output.name)
        assert validate_y4m(default_storage.path(job.output.name))
        body = api.get(f"/api/v1/jobs/{job.pk}").json()
        assert body["state"] == "SUCCEEDED" and body["output_url"]
        run = (attempt.ended_at - attempt.started_at).total_seconds()
        assert body["credits"] == {"held": 0, "refunded": 0,
                                   "spent": cost(attempt.credits_per_hour, run)}
    assert_ledger_consistent()
