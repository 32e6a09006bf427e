"""Faults at random over the real processes, then every invariant checked on what is left.

Three nodes of 2 GPUs (one island, so 4-GPU gangs span two) run a stream of jobs of a paid
organization, and of an enterprise one whose jobs preempt long paid ones, while, for
GPUSCHED_CHAOS_S seconds (40 by default), a seeded random hand kills nodes with -9 or stops
them as a service manager does and starts them again, freezes them past their leases (as a
network cut does, their binaries running on), kills the scheduler's worker or beat, cuts
every connection to PostgreSQL and Redis (a failover), cancels jobs and submits more. Jobs
crash, hang, run out of memory or write a broken output on their first try. Once the fleet
is whole again and every job has ended:
- every job accepted ended, as its kind says it must: all succeed but those that run out of
  memory and those cancelled, however often their nodes died under them (invariant 1);
- no GPU was ever bound to two attempts at once, none is bound now (2, 4);
- a job's tries never overlapped, and every step of its history is an allowed transition (3);
- no job cancelled started again;
- the ledger adds up and every hold is settled (5);
- no binary runs on.
A failure names its seed: GPUSCHED_CHAOS_SEED=N repeats the run's choices (not its timing).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
from django.conf import settings

from credits.models import GpuPrice, Hold
from credits.services.grants import credits_grant
from jobs.models import Attempt, GpuBinding, Job, Organization
from jobs.services.cancellation import job_cancel
from jobs.services.errors import Conflict
from jobs.services.outputs import FOLDER
from jobs.services.tenancy import organization_create
from jobs.states import ALLOWED, TERMINAL
from tests.support.broker import purge_broker_and_cache
from tests.support.database_cuts import cut_all_but_own
from tests.support.factories import make_job
from tests.support.ledger import assert_ledger_consistent
from tests.support.processes import ProcessGroup, binaries_under, wait_for
from workers.models import Node

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SEED = int(os.environ.get("GPUSCHED_CHAOS_SEED", random.randrange(1 << 30)))
CHAOS_S = float(os.environ.get("GPUSCHED_CHAOS_S", "40"))
FAST = {"GPUSCHED_LEASE_SECONDS": "3", "GPUSCHED_HEARTBEAT_SECONDS": "0.5",
        "GPUSCHED_NODE_STALE_SECONDS": "3", "GPUSCHED_RETRY_BACKOFF_S": "0.5",
        "GPUSCHED_KILL_GRACE_S": "1", "GPUSCHED_METER_INTERVAL_S": "1",
        "GPUSCHED_HANG_TIMEOUT_S": "3", "GPUSCHED_LOG_PUBLISH_S": "0.5",
        "GPUSCHED_PREEMPT_MIN_RUNTIME_S": "2",
        # the kills below lose tries by the dozen: no job may run out of retries for them,
        # and the binaries' own failures are no node's fault
        "GPUSCHED_MAX_RETRIES": "20", "GPUSCHED_CORDON_AFTER_FAILURES": "1000"}


def _long(rng: random.Random) -> dict:
    """A run its client says is long (what ranks it a preemption's victim: docs/policy.md)."""
    return {"run_seconds": round(rng.uniform(15, 25), 1), "progress_interval": 0.25,
            "checkpoint_every": 1, "expected_duration_s": 600}


def _kind(rng: random.Random) -> tuple[str, int, dict]:
    """A paid job's kind, its GPUs and its binary's knobs (docs/fakegen.md)."""
    run = {"run_seconds": round(rng.uniform(3, 8), 1), "progress_interval": 0.25,
           "checkpoint_every": 1}
    once = {"fail_at": 0.5, "fail_tries": 1}  # fails on its first try only
    kinds = [("ok", rng.choice((1, 1, 2)), run), ("gang", 4, run),
             ("long", rng.choice((1, 2)), _long(rng)),
             ("crash", 1, {**run, **once, "fail": "crash"}),
             ("hang", 1, {**run, **once, "fail": "hang"}),
             ("corrupt", 1, {**run, "fail": "corrupt", "fail_tries": 1}),
             ("oom", 1, {**run, "fail": "oom", "fail_at": 0.3})]
    return rng.choices(kinds, weights=(40, 10, 12, 10, 8, 8, 12))[0]


@dataclass
class Chaos:
    group: ProcessGroup
    paid: Organization
    enterprise: Organization
    rng: random.Random
    nodes: dict[str, subprocess.Popen] = field(default_factory=dict)
    services: dict[str, subprocess.Popen] = field(default_factory=dict)
    kinds: dict[int, str] = field(default_factory=dict)
    cancelled: set[int] = field(default_factory=set)
    done: Counter = field(default_factory=Counter)

    def start_node(self, name: str) -> None:
        self.nodes[name] = self.group.node(name, 2, island="r1")

    def start_service(self, name: str) -> None:
        if name == "beat":
            self.services[name] = self.group.celery("beat", "beat", "--loglevel=INFO")
        else:
            self.services[name] = self.group.celery(
                "scheduler", "worker", "-Q", "scheduler,default", "-c", "1",
                "--hostname=scheduler@%h", "--without-gossip", "--without-mingle")

    def submit(self, count: int) -> None:
        for _ in range(count):
            if self.rng.random() < 0.2:
                self.submit_enterprise()
                continue
            kind, gpus, params = _kind(self.rng)
            self.kinds[make_job(self.paid, gpus=gpus, **params).pk] = kind

    def submit_long(self, count: int) -> None:
        for _ in range(count):
            self.kinds[make_job(self.paid, gpus=1, **_long(self.rng)).pk] = "long"

    def submit_enterprise(self) -> None:
        """Not preemptible, and below its tier's floor it preempts the long paid jobs."""
        job = make_job(self.enterprise, gpus=self.rng.choice((1, 2)),
                       run_seconds=round(self.rng.uniform(3, 6), 1), progress_interval=0.25,
                       checkpoint_every=1)
        self.kinds[job.pk] = "enterprise"

    def act(self) -> None:
        action = self.rng.choices(("kill_node", "stop_node", "pause_node", "kill_scheduler",
                                   "kill_beat", "drop_connections", "cancel", "submit"),
                                  weights=(30, 12, 10, 10, 5, 10, 18, 15))[0]
        self.done[action] += 1
        if action == "drop_connections":
            _drop_connections()
        elif action == "pause_node":
            # frozen past its lease, as a node cut off from the network: its binary, in a
            # session of its own, runs on, and must be fenced off when the agent wakes
            node = self.nodes[self.rng.choice(sorted(self.nodes))]
            os.killpg(node.pid, signal.SIGSTOP)
            time.sleep(self.rng.uniform(4, 8))
            os.killpg(node.pid, signal.SIGCONT)
        elif action in ("kill_node", "stop_node"):
            name = self.rng.choice(sorted(self.nodes))
            self.group.kill(self.nodes[name],
                            signal.SIGKILL if action == "kill_node" else signal.SIGTERM)
            time.sleep(self.rng.uniform(0.5, 3))
            self.start_node(name)
        elif action in ("kill_scheduler", "kill_beat"):
            name = action.removeprefix("kill_")
            self.group.kill(self.services[name])
            time.sleep(self.rng.uniform(0.5, 2))
            self.start_service(name)
        elif action == "cancel":
            live = sorted(Job.objects.exclude(state__in=TERMINAL).values_list("pk", flat=True))
            if live:
                pk = self.rng.choice(live)
                with contextlib.suppress(Conflict):  # it ended meanwhile
                    job_cancel(job=Job.objects.get(pk=pk), reason="chaos")
                    self.cancelled.add(pk)
        else:
            self.submit(4)

    def summary(self) -> str:
        states = Counter(Job.objects.values_list("state", flat=True))
        ends = Counter(Attempt.objects.values_list("outcome", flat=True))
        return (f"seed {SEED}: {len(self.kinds)} jobs {dict(states)}, "
                f"{Attempt.objects.count()} tries ({ends['LOST']} lost, {ends['PREEMPTED']} "
                f"preempted), actions {dict(self.done)}")


def _drop_connections() -> None:
    """Every connection the processes hold to the test's database and Redis DB is cut, as a
    failover or a network blip cuts them: each must find its way back."""
    cut_all_but_own()
    for url in {settings.CELERY_BROKER_URL, settings.REDIS_URL} - {""}:
        client = redis.Redis.from_url(url)
        mine, db = client.client_id(), client.connection_pool.connection_kwargs.get("db", 0)
        for peer in client.client_list():
            if int(peer["db"]) == db and int(peer["id"]) != mine:
                with contextlib.suppress(redis.ResponseError):  # it left meanwhile
                    client.client_kill_filter(_id=peer["id"])
        client.close()


@pytest.fixture
def chaos(alice):
    purge_broker_and_cache()
    group = ProcessGroup(**FAST)
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    bigco = organization_create(slug="bigco", tier="enterprise")
    for org in (alice, bigco):
        credits_grant(organization=org, amount=10_000_000)
    run = Chaos(group, alice, bigco, random.Random(SEED))
    yield run
    group.stop_all()


def test_every_invariant_holds_after_random_faults(chaos):
    tag = uuid.uuid4().hex[:6]
    for i in range(3):
        chaos.start_node(f"c{i}-{tag}")
    wait_for(lambda: Node.objects.filter(name__endswith=tag).count() == 3, 60, "three nodes")
    for name in ("beat", "scheduler"):
        chaos.start_service(name)
    chaos.submit_long(6)  # the whole fleet, for long: what enterprise must preempt
    wait_for(lambda: Job.objects.filter(state="RUNNING").count() == 6, 60, "six long jobs")
    time.sleep(2)  # past the runtime that spares a victim
    for _ in range(2):
        chaos.submit_enterprise()
    chaos.submit(18)
    until = time.monotonic() + CHAOS_S
    while time.monotonic() < until:
        time.sleep(chaos.rng.uniform(1, 4))
        chaos.act()
    try:
        wait_for(lambda: not Job.objects.exclude(state__in=TERMINAL).exists(), 300,
                 "every job to end")
    except AssertionError:
        left = list(Job.objects.exclude(state__in=TERMINAL).values(
            "pk", "state", "pending_code", "pending_reason"))
        raise AssertionError(f"{chaos.summary()}; not ended: {left}\n"
                             f"{chaos.group.logs()}") from None
    print(chaos.summary())
    _ended_as_their_kind(chaos)
    _gpus_bound_once(chaos)
    _tries_in_turn(chaos)
    _outputs_named(chaos)
    assert_ledger_consistent()
    assert not Hold.objects.filter(closed_at__isnull=True).exists(), chaos.summary()
    assert not binaries_under(chaos.group.work_root), chaos.summary()


def _ended_as_their_kind(chaos: Chaos) -> None:
    for job in Job.objects.all():
        if job.pk in chaos.cancelled:
            # stopped, or it ended on its own before the stop reached it; never retried
            assert job.state in ("CANCELLED", "SUCCEEDED", "FAILED"), (job.pk, chaos.summary())
            cancel = job.events.filter(to_state="CANCELLED").first()
            if cancel is not None:
                assert not job.attempts.filter(created_at__gt=cancel.at).exists(), job.pk
        elif chaos.kinds[job.pk] == "oom":
            assert (job.state, job.error_code) == ("FAILED", "out_of_memory"), (
                job.pk, job.state, job.error_code, chaos.summary())
        else:
            assert job.state == "SUCCEEDED", (job.pk, chaos.kinds[job.pk], job.state,
                                              job.error_code, job.error, chaos.summary())


def _gpus_bound_once(chaos: Chaos) -> None:
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists(), chaos.summary()
    last: dict[int, object] = {}
    for b in GpuBinding.objects.order_by("gpu_id", "bound_at", "pk"):
        if b.gpu_id in last:
            assert b.bound_at >= last[b.gpu_id], (b.gpu_id, b.attempt_id, chaos.summary())
        last[b.gpu_id] = b.released_at


def _outputs_named(chaos: Chaos) -> None:
    """Storage holds the outputs the jobs name and nothing else: no copy of a report cut off
    before it committed, or of a try lost after its copy, stays behind."""
    named = set(Job.objects.exclude(output="").values_list("output", flat=True))
    stored = {str(p.relative_to(settings.MEDIA_ROOT))
              for p in Path(settings.MEDIA_ROOT, FOLDER).glob("*/*")}
    assert stored == named, (sorted(stored ^ named), chaos.summary())


def _tries_in_turn(chaos: Chaos) -> None:
    for job in Job.objects.prefetch_related("attempts", "events"):
        tries = sorted(job.attempts.all(), key=lambda a: a.pk)
        assert all(t.ended_at for t in tries), (job.pk, chaos.summary())
        for before, after in zip(tries, tries[1:], strict=False):
            assert after.created_at >= before.ended_at and after.token > before.token, job.pk
        events = sorted(job.events.all(), key=lambda e: (e.version, e.pk))
        for event in events:  # a step in place (a stop asked, say) is recorded, not a move
            if event.from_state and event.from_state != event.to_state:
                assert event.to_state in ALLOWED[event.from_state], (job.pk, event.from_state,
                                                                     event.to_state)
        steps = [(e.from_state, e.to_state) for e in events]
        assert all(a[1] == b[0] for a, b in zip(steps, steps[1:], strict=False)), (job.pk, steps)
