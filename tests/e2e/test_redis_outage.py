"""Redis, the broker and the cache, down for a few seconds while a job runs, then started
again empty (a restart without persistence, a failover to a new server): the running job
goes on and succeeds in its one try, a job submitted meanwhile is taken and starts once Redis
is back, every process lives on (the node's worker did not: gpusched/broker.py), and the
ledger adds up. The fleet's Redis is a server of the test's own, since
the suite's lanes share the machine's."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

from jobs.models import Attempt, Job
from tests.support.factories import make_job
from tests.support.fleets import small_fleet
from tests.support.ledger import assert_ledger_consistent
from tests.support.processes import binaries_under, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
OUTAGE_S = 5.0


class RedisServer:
    def __init__(self, workdir) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.workdir, self.proc = workdir, None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for(self._answers, 10, "Redis to answer")

    def stop(self) -> None:
        self.proc.kill()  # as a crash: nothing it held survives
        self.proc.wait(timeout=10)

    def _answers(self) -> bool:
        return subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True,
                              text=True).stdout.strip() == "PONG"


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    yield server
    if server.proc.poll() is None:
        server.stop()


@pytest.fixture
def fleet(alice, redis_server):
    group = small_fleet(alice, "ro", REDIS_URL=redis_server.url,
                        CELERY_BROKER_URL=redis_server.url, GPUSCHED_LEASE_SECONDS="15",
                        GPUSCHED_NODE_STALE_SECONDS="15")
    yield group
    group.stop_all()


def test_jobs_run_through_a_redis_restart_without_losing_a_try(alice, fleet, redis_server):
    running = make_job(alice, run_seconds=10, progress_interval=0.25, checkpoint_every=1)
    wait_for(lambda: Attempt.objects.filter(job=running, progress__gt=0.2).exists(), 60,
             "the job well under way")
    redis_server.stop()
    waiting = make_job(alice, run_seconds=2, progress_interval=0.25)  # taken meanwhile
    time.sleep(OUTAGE_S)
    assert Attempt.objects.get(job=running).ended_at is None  # it ran on without Redis
    redis_server.start()
    wait_for(lambda: Job.objects.filter(pk__in=[running.pk, waiting.pk],
                                        state="SUCCEEDED").count() == 2, 90,
             f"both to succeed\n{fleet.logs()}")
    after = make_job(alice, run_seconds=1, progress_interval=0.25)  # the node lives on
    wait_for(lambda: Job.objects.get(pk=after.pk).state == "SUCCEEDED", 60,
             f"a job after the outage to succeed\n{fleet.logs()}")
    for job in (running, waiting, after):
        assert Attempt.objects.filter(job=job).count() == 1, fleet.logs()
    assert all(proc.poll() is None for _, proc, _ in fleet.procs), fleet.logs()
    assert_ledger_consistent()
    wait_for(lambda: not binaries_under(fleet.work_root), 30, "no binary left")
