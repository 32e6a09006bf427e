"""The tick's cache of live attempts never serves an attempt as it was: every change the
snapshot reads (a start, a stop request, a checkpoint, its job's row, its organization's
tier, its end) reaches the next load, which must equal a fresh read; heartbeats alone read
nothing again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Attempt, Job, Organization, Tier
from jobs.scheduler.live_cache import LiveCache, _named, _read
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from tests.support.factories import make_job, make_node
from workers.services.attempts import (
    AttemptResult,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_cache")]



def _fresh() -> list[tuple]:
    return _named(list(_read(Attempt.objects.order_by("pk"))))


def _check(cache: LiveCache) -> int:
    """Load through `cache`; it must equal a fresh read. Returns the attempts read again."""
    assert cache.load() == _fresh()
    return cache.last_read


@pytest.fixture
def running(alice) -> list[Attempt]:
    make_node("n1", gpus=4)
    for _ in range(4):
        make_job(alice)
    scheduler_tick_run()
    attempts = list(Attempt.objects.order_by("pk"))
    for a in attempts[:3]:
        attempt_start(attempt_id=a.pk, token=a.token)
    return attempts


def test_heartbeats_read_nothing_again(running):
    cache = LiveCache()
    assert _check(cache) == 4 and _check(cache) == 0
    for a in running[:3]:
        attempt_heartbeat(attempt_id=a.pk, token=a.token, progress=0.5)  # rewrites the row
    assert _check(cache) == 0


def test_every_change_the_snapshot_reads_reaches_the_next_load(running, alice):
    cache = LiveCache()
    _check(cache)
    first, second, third, unstarted = running
    attempt_heartbeat(attempt_id=first.pk, token=first.token, checkpointed=True)
    assert _check(cache) == 1
    Attempt.objects.filter(pk=second.pk).update(
        stop_requested="preempt", stop_deadline=timezone.now() + timedelta(seconds=9))
    assert _check(cache) == 1
    Job.objects.filter(pk=third.job_id).update(preemptible=False)  # its job's row
    assert _check(cache) == 1
    attempt_start(attempt_id=unstarted.pk, token=unstarted.token)
    assert _check(cache) == 1
    Organization.objects.filter(pk=alice.pk).update(
        tier=Tier.objects.get(name="enterprise"))  # names are read at every load
    assert _check(cache) == 0
    assert {row[3] for row in cache.load()} == {"enterprise"}
    attempt_finish(attempt_id=first.pk, token=first.token,
                   result=AttemptResult("SUCCEEDED", 0, "", None, ""))
    job_cancel(job=Job.objects.get(pk=second.job_id))  # asked to stop again: its node's
    assert _check(cache) == 1 and len(cache.load()) == 3


def test_a_new_attempt_is_read_and_an_ended_one_dropped(running, alice):
    cache = LiveCache()
    _check(cache)
    a = running[0]
    attempt_finish(attempt_id=a.pk, token=a.token,
                   result=AttemptResult("FAILED", 1, "", None, "exit_1"))
    make_job(alice)
    scheduler_tick_run()  # the freed GPU goes to the new job
    assert _check(cache) == 1
    assert a.pk not in {row[0] for row in cache.load()}


def test_the_snapshot_reads_live_attempts_through_the_cache(running):
    from jobs.scheduler.live_cache import shared_cache
    from jobs.scheduler.snapshot import load_snapshot

    load_snapshot(timezone.now())
    load_snapshot(timezone.now())
    assert shared_cache().last_read == 0 and len(shared_cache().keys) == 4
