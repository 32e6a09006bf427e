"""Invariant 5 under an arbitrary order of events: grants, submissions, starts, checkpoints,
every kind of end, preemptions, lost nodes, cancellations and expiry, in a seeded random
order. After every step the books balance; at the end every hold is settled and each job paid
what the rules in docs/credits.md say."""

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from credits.errors import InsufficientCredits
from credits.models import GpuPrice, Hold
from credits.services.grants import credits_grant, expire_buckets
from credits.services.statements import organization_balance
from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.submission import JobSpec, job_submit
from jobs.states import TERMINAL, JobState
from jobs.transitions import transition
from tests.support.factories import make_node
from tests.support.ledger import assert_ledger_consistent
from workers.services.attempts import (
    AttemptResult,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)

pytestmark = pytest.mark.django_db(transaction=True)
STEPS = 150


def _live(status: str) -> list[Attempt]:
    return list(Attempt.objects.filter(ended_at__isnull=True, status=status))


class Walk:
    def __init__(self, org, rng: random.Random):
        self.org, self.rng, self.refused = org, rng, 0

    def grant(self):
        promo = self.rng.random() < 0.4
        expires = timezone.now() + timedelta(seconds=self.rng.choice([5, 3600])) if promo else None
        credits_grant(organization=self.org, amount=self.rng.randint(1_000, 20_000), promo=promo,
                      expires_at=expires)

    def submit(self):
        spec = JobSpec(prompt="x", gpus=self.rng.choice([1, 2, 4]),
                       time_limit_s=self.rng.choice([60, 300, 900]),
                       gpu_types=self.rng.choice([(), ("A100",), ("H100", "A100")]),
                       checkpointable=self.rng.random() < 0.5)
        try:
            job_submit(organization=self.org, spec=spec)
        except InsufficientCredits:
            self.refused += 1

    def tick(self):
        scheduler_tick_run()

    def start(self):
        for attempt in _live("SCHEDULED")[:2]:
            attempt_start(attempt_id=attempt.pk, token=attempt.token)
            self._ran(attempt)

    def _ran(self, attempt: Attempt):
        Attempt.objects.filter(pk=attempt.pk).update(
            started_at=timezone.now() - timedelta(seconds=self.rng.randint(0, 1_200)))

    def checkpoint(self):
        for attempt in _live("RUNNING")[:2]:
            self._ran(attempt)
            token = attempt.token + (1 if self.rng.random() < 0.2 else 0)  # stale, sometimes
            attempt_heartbeat(attempt_id=attempt.pk, token=token, checkpointed=True)

    def finish(self):
        running = _live("RUNNING")
        if running:
            attempt = self.rng.choice(running)
            outcome = self.rng.choice(["SUCCEEDED", "FAILED", "OOM", "TIMED_OUT", "CANCELLED"])
            attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                           result=AttemptResult(outcome, 0))

    def preempt(self):
        running = _live("RUNNING")
        if running:
            attempt = self.rng.choice(running)
            transition(Job.objects.get(pk=attempt.job_id), JobState.PREEMPTING, reason="walk")
            attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                           result=AttemptResult("PREEMPTED", 75))

    def lose(self):
        running = _live("RUNNING")
        if running:
            Attempt.objects.filter(pk=self.rng.choice(running).pk).update(
                lease_expires_at=timezone.now() - timedelta(seconds=1))
            scheduler_tick_run()

    def cancel(self):
        alive = list(Job.objects.exclude(state__in=TERMINAL))
        if alive:
            job_cancel(job=self.rng.choice(alive))

    def expire(self):
        expire_buckets(now=timezone.now() + timedelta(seconds=self.rng.choice([0, 10])))

    def end_everything(self):
        for attempt in _live("RUNNING"):
            attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                           result=AttemptResult("SUCCEEDED", 0))
        for job in Job.objects.exclude(state__in=TERMINAL):
            job_cancel(job=job)
        for attempt in _live("RUNNING"):  # cancelled while running: its node reports
            attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                           result=AttemptResult("CANCELLED", 143))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_books_balance_whatever_happens(alice, settings, seed):
    settings.GPUSCHED_RETRY_BACKOFF_S = 0
    settings.GPUSCHED_MAX_RETRIES = 1
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    GpuPrice.objects.create(gpu_type="A100", credits_per_gpu_hour=1800)
    make_node("h1", gpus=4)
    make_node("a1", gpus=4, gpu_type="A100")
    walk = Walk(alice, random.Random(seed))
    moves = [walk.grant, walk.submit, walk.submit, walk.tick, walk.tick, walk.start, walk.start,
             walk.checkpoint, walk.checkpoint, walk.finish, walk.preempt, walk.lose,
             walk.cancel, walk.expire]
    for _ in range(STEPS):
        walk.rng.choice(moves)()
        assert_ledger_consistent()
    walk.end_everything()
    assert_ledger_consistent()
    assert not Hold.objects.filter(closed_at__isnull=True).exists()
    assert organization_balance(alice)["held"] == 0
    for job in Job.objects.all():
        holds = list(Hold.objects.filter(job=job))
        spent = sum(h.posted - h.refunded for h in holds)
        assert spent <= sum(h.amount for h in holds)
        if job.state in (JobState.FAILED, JobState.DEAD):
            assert spent == 0, job
    assert Job.objects.count() > 5 and Hold.objects.filter(posted__gt=0).exists()
