"""Invariant 2 and 3 are kept by the database itself, not only by the scheduler's code."""

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.fencing import next_token
from jobs.models import Attempt, GpuBinding
from tests.support.factories import make_job, make_node

pytestmark = pytest.mark.django_db


def _attempt(job, node, indices):
    return Attempt.objects.create(job=job, node=node, gpu_indices=indices, token=next_token())


def test_the_database_refuses_to_bind_one_gpu_to_two_live_attempts(alice):
    node = make_node(gpus=2)
    gpu = node.gpus.get(index=0)
    first = _attempt(make_job(alice), node, [0])
    second = _attempt(make_job(alice), node, [0])
    GpuBinding.objects.create(gpu=gpu, attempt=first)
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuBinding.objects.create(gpu=gpu, attempt=second)
    assert GpuBinding.objects.filter(gpu=gpu, released_at__isnull=True).get().attempt == first


def test_a_released_gpu_can_be_bound_again(alice):
    node = make_node(gpus=1)
    gpu = node.gpus.get()
    first = _attempt(make_job(alice), node, [0])
    GpuBinding.objects.create(gpu=gpu, attempt=first)
    GpuBinding.objects.filter(attempt=first).update(released_at=timezone.now())
    GpuBinding.objects.create(gpu=gpu, attempt=_attempt(make_job(alice), node, [0]))
    assert GpuBinding.objects.filter(gpu=gpu).count() == 2


def test_the_database_refuses_a_second_live_attempt_of_one_job(alice):
    node = make_node(gpus=2)
    job = make_job(alice)
    _attempt(job, node, [0])
    with pytest.raises(IntegrityError), transaction.atomic():
        _attempt(job, node, [1])


def test_fencing_tokens_only_grow(db):
    tokens = [next_token() for _ in range(5)]
    assert tokens == sorted(tokens) and len(set(tokens)) == 5


def test_a_job_holding_gpus_or_credits_cannot_be_deleted(alice):
    """DESIGN: a job is never deleted while it holds GPUs or credits; the database refuses,
    whichever way the delete comes."""
    from django.db import connection
    from django.db.models import ProtectedError

    from credits.models import GpuPrice
    from credits.services.grants import credits_grant
    from jobs.models import Job
    from jobs.scheduler.tick import scheduler_tick_run

    make_node(gpus=1)
    running = make_job(alice)
    scheduler_tick_run()
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=running.pk).delete()  # cascades to its attempt and binding
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM jobs_gpubinding")
    assert GpuBinding.objects.filter(released_at__isnull=True).count() == 1
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=10_000)
    holding = make_job(alice)
    with pytest.raises(ProtectedError), transaction.atomic():
        holding.delete()
    GpuBinding.objects.update(released_at=timezone.now())
    Job.objects.filter(pk=running.pk).delete()  # released: it may go
