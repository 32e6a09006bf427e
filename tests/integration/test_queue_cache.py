"""The tick's queue cache never serves a job as it was: every change a row or a name can
undergo reaches the next load, which must equal a fresh read of the whole queue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs.models import Job, Organization, Project, Tier
from jobs.scheduler.queue_cache import QueueCache, queue_rows_read
from jobs.scheduler.snapshot import load_queued
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_node

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("clean_cache")]



def _submit(org, **spec) -> Job:
    return job_submit(organization=org, spec=JobSpec(prompt="a cat", **spec))


def _fill(org) -> list[Job]:
    Project.objects.get_or_create(organization=org, name="video")
    return [_submit(org, gpus=(1, 2, 4, 8)[i % 4], time_limit_s=60 * (1 + i % 5),
                    project=("default", "video")[i % 2],
                    params={"expected_duration_s": 30 + i} if i % 3 else {},
                    gpu_types=("H100",) if i % 4 == 1 else ())
            for i in range(24)]


def _fresh(limit_weight: float = 0.0):
    return QueueCache(versioned=False).load(limit_weight)


def _check(cache: QueueCache, limit_weight: float = 0.0) -> int:
    """Load through `cache`; it must equal a fresh read. Returns the rows it read again."""
    assert cache.load(limit_weight) == _fresh(limit_weight)
    return cache.last_read


def test_an_unchanged_queue_is_read_from_the_cache(alice):
    _fill(alice)
    cache = QueueCache(versioned=True)
    assert _check(cache) == 24
    assert _check(cache) == 0  # nothing changed: no row read again


def test_every_kind_of_change_reaches_the_next_load(alice, bob):
    jobs = _fill(alice)
    cache = QueueCache(versioned=True)
    _check(cache)

    _submit(bob, gpus=2)
    assert _check(cache) == 1  # a new job

    job_cancel(job=jobs[0])
    assert _check(cache) == 0  # a job gone: nothing to read

    later = timezone.now() + timedelta(minutes=5)  # requeued: a new wait, one more preemption
    Job.objects.filter(pk=jobs[1].pk).update(enqueued_at=later, preemptions=1)
    Job.objects.filter(pk=jobs[2].pk).update(gpus=8, time_limit_s=7200, region="eu",
                                              params={"expected_duration_s": 5})
    assert _check(cache) == 2

    enterprise = Tier.objects.get(name="enterprise")  # names change, not rows
    Organization.objects.filter(slug="alice").update(tier=enterprise)
    Project.objects.filter(organization=alice, name="video").update(name="film")
    assert _check(cache) == 0
    loaded = {j.job_id: j for j in cache.load(0.0)}
    assert (loaded[jobs[3].pk].tier, loaded[jobs[3].pk].project) == ("enterprise", "film")

    assert _check(cache, limit_weight=10.0) == 24  # another order: all read again


def test_a_job_that_left_the_queue_while_changed_is_dropped(alice):
    jobs = _fill(alice)
    cache = QueueCache(versioned=True)
    _check(cache)
    Job.objects.filter(pk=jobs[5].pk).update(state="SCHEDULED")
    Job.objects.filter(pk=jobs[6].pk).update(preemptions=3)
    _check(cache)
    assert jobs[5].pk not in {j.job_id for j in cache.load(0.0)}


def test_many_changes_read_the_whole_queue_in_order(alice):
    jobs = _fill(alice)
    cache = QueueCache(versioned=True)
    _check(cache)
    Job.objects.filter(pk__in=[j.pk for j in jobs[:12]]).update(time_limit_s=30)
    assert _check(cache, limit_weight=10.0) == 24


def test_inside_a_transaction_a_row_written_twice_is_read_twice(alice):
    """One transaction's two writes share one xmin: the cache must not serve inside it."""
    job = _submit(alice)
    load_queued()  # the process's cache now holds the job
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(preemptions=1)
        assert load_queued()[0].preemptions == 1
        Job.objects.filter(pk=job.pk).update(preemptions=2)
        assert load_queued()[0].preemptions == 2


def test_the_tick_places_a_job_changed_since_the_last_tick(alice):
    """Through the service's tick: a gang grown past the only node waits; shrunk, it starts."""
    make_node("n1", gpus=4)
    job = _submit(alice, gpus=8)
    scheduler_tick_run()
    assert Job.objects.get(pk=job.pk).state == "QUEUED"
    Job.objects.filter(pk=job.pk).update(gpus=4)
    scheduler_tick_run()
    assert Job.objects.get(pk=job.pk).state == "SCHEDULED"


def test_a_reason_changed_behind_the_ticks_back_is_written_again(alice):
    """The tick skips reasons its cache says a row holds; a row rewritten since it was read
    has a new version, is read again, and gets its reason back."""
    make_node("n1", gpus=1)
    first, *waiting = [_submit(alice).pk for _ in range(10)]  # 1 of 9 stays under the
    # share of changed rows past which the whole queue is read again
    scheduler_tick_run()
    scheduler_tick_run()  # the reasons now name the running job, and stay
    reasons = dict(Job.objects.filter(pk__in=waiting).values_list("pk", "pending_reason"))
    assert all(reasons.values())
    assert scheduler_tick_run().applied.reasons_written == 0  # the cache read them back
    Job.objects.filter(pk=waiting[0]).update(pending_reason="tampered", pending_code="x")
    assert scheduler_tick_run().applied.reasons_written == 1
    assert queue_rows_read() == 1  # the tampered row only
    assert Job.objects.get(pk=waiting[0]).pending_reason == reasons[waiting[0]]


def test_another_database_server_empties_the_cache(alice):
    """After a failover or a restore, transaction ids are handed out again: the cache must
    not trust a version it saw on the server before."""
    _fill(alice)
    cache = QueueCache(versioned=True)
    _check(cache)
    assert _check(cache) == 0
    cache.server = "a server started before a failover"
    assert _check(cache) == 24
