"""Two schedulers at once: one tick at a time, and never a GPU given twice."""

import threading

import pytest
from django.db import connection

from jobs.models import Attempt, AttemptRank, GpuBinding
from jobs.scheduler.lock import tick_lock
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node
from tests.support.threads import race

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_second_tick_is_skipped_while_one_holds_the_lock(alice):
    held = threading.Event()
    release = threading.Event()

    def hold():
        with tick_lock() as got:
            assert got
            held.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        assert scheduler_tick_run().ran is False
    finally:
        release.set()
        holder.join()
    assert scheduler_tick_run().ran is True


def test_racing_ticks_place_each_job_once_and_each_gpu_once(alice):
    for i in range(3):
        make_node(f"n{i}", gpus=4)
    for i in range(30):
        make_job(alice, gpus=1 + i % 4)
    race(lambda: [scheduler_tick_run() for _ in range(3)], 4)
    live = GpuBinding.objects.filter(released_at__isnull=True)
    assert live.count() == len(set(live.values_list("gpu_id", flat=True))) == 12
    assert Attempt.objects.values("job").distinct().count() == Attempt.objects.count()


def test_racing_ticks_bind_gangs_across_nodes_whole_and_each_gpu_once(alice):
    for i in range(4):
        make_node(f"n{i}", gpus=4, island="r1")
    for i in range(12):
        make_job(alice, gpus=(8, 2, 12, 1)[i % 4])
    race(lambda: [scheduler_tick_run() for _ in range(3)], 4)
    live = GpuBinding.objects.filter(released_at__isnull=True)
    assert live.count() == len(set(live.values_list("gpu_id", flat=True))) == 16
    assert Attempt.objects.values("job").distinct().count() == Attempt.objects.count()
    for attempt in Attempt.objects.select_related("job"):  # every gang whole, or not at all
        ranks = attempt.ranks.all()
        held = len(attempt.gpu_indices) + sum(len(r.gpu_indices) for r in ranks)
        assert held == attempt.job.gpus == attempt.bindings.count()
        assert len({attempt.node_id, *(r.node_id for r in ranks)}) == 1 + len(ranks)
    assert AttemptRank.objects.exists()
