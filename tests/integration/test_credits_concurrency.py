"""The ledger's lock order under fire: threads submit, grant, checkpoint, finish, cancel,
expire, lose nodes and requeue at once for two organizations sharing the system accounts,
while the scheduler places, reaps and starts. No deadlock (PostgreSQL
would abort one side with an error), no lost update: afterwards the books balance."""

import contextlib
import random
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from credits.errors import InsufficientCredits
from credits.models import GpuPrice
from credits.services.grants import credits_grant, expire_buckets
from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.errors import Conflict
from jobs.services.requeue import attempt_stop_and_requeue
from jobs.services.submission import JobSpec, job_submit
from jobs.services.tenancy import organization_create
from jobs.states import TERMINAL
from tests.support.factories import make_node
from tests.support.ledger import assert_ledger_consistent
from workers.services.attempts import (
    AttemptResult,
    StaleAttempt,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)

pytestmark = pytest.mark.django_db(transaction=True)
THREADS, OPS = 6, 60


def _running() -> list[Attempt]:
    return list(Attempt.objects.filter(ended_at__isnull=True, status="RUNNING"))


def _one_op(rng: random.Random, orgs) -> None:
    org = rng.choice(orgs)
    op = rng.randrange(8)
    if op == 0:
        promo = rng.random() < 0.5
        credits_grant(organization=org, amount=rng.randint(500, 3_000), promo=promo,
                      expires_at=timezone.now() + timedelta(seconds=1) if promo else None)
    elif op == 1:
        job_submit(organization=org, spec=JobSpec(prompt="x", gpus=rng.choice([1, 2]),
                                                  time_limit_s=rng.choice([60, 300])))
    elif op == 2 and (running := _running()):
        a = rng.choice(running)
        Attempt.objects.filter(pk=a.pk).update(
            started_at=timezone.now() - timedelta(seconds=rng.randint(1, 200)))
        attempt_heartbeat(attempt_id=a.pk, token=a.token, checkpointed=True)
    elif op == 3 and (running := _running()):
        a = rng.choice(running)
        attempt_finish(attempt_id=a.pk, token=a.token,
                       result=AttemptResult(rng.choice(["SUCCEEDED", "FAILED"]), 0))
    elif op == 4 and (alive := list(Job.objects.exclude(state__in=TERMINAL)[:20])):
        job_cancel(job=rng.choice(alive))
    elif op == 5:
        expire_buckets(now=timezone.now())
    elif op == 6 and (running := _running()):  # its node goes quiet: the next tick reaps it
        Attempt.objects.filter(pk=rng.choice(running).pk).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1))
    elif op == 7 and (running := _running()):  # an operator requeues it
        attempt_stop_and_requeue(rng.choice(running), reason="stress")


def test_concurrent_ledger_work_neither_deadlocks_nor_loses_a_credit(alice, settings):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    orgs = [alice, organization_create(slug="carol", tier="paid")]
    for org in orgs:
        credits_grant(organization=org, amount=20_000)
    make_node("n1", gpus=8)
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS + 1)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        barrier.wait()
        try:
            for _ in range(OPS):
                # refusals and lost races are answers, not failures
                with contextlib.suppress(InsufficientCredits, StaleAttempt, Conflict):
                    _one_op(rng, orgs)
        except BaseException as exc:  # noqa: BLE001 - a deadlock or a broken check
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for t in threads:
        t.start()
    barrier.wait()
    while any(t.is_alive() for t in threads):  # the scheduler places and nodes start meanwhile
        scheduler_tick_run()
        for a in Attempt.objects.filter(ended_at__isnull=True, status="SCHEDULED"):
            with contextlib.suppress(StaleAttempt):
                attempt_start(attempt_id=a.pk, token=a.token)
    for t in threads:
        t.join()
    assert errors == [], "\n\n".join(str(e) for e in errors)
    assert_ledger_consistent()
