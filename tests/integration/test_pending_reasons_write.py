"""The tick stores every waiting job's reason, and rewrites only the rows that changed."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.policy.types import Decisions, PendingReason, PendingReasons, QueuedJob
from jobs.scheduler.apply import apply_decisions
from jobs.scheduler.reasons import write_reasons
from tests.support.factories import make_job

pytestmark = pytest.mark.django_db

BUSY = PendingReason("priority", "waiting behind higher-ranked jobs in tier paid and above")
SOON = PendingReason("resources", "needs 1 free GPU; estimated start soon", 1.9e9)
DATED = PendingReason(BUSY.code, BUSY.text, 1.9e9)  # the same words, now with an estimate


def _pending(jobs: list[Job], run_reason: PendingReason) -> PendingReasons:
    """The first job answered on its own, the others as one run."""
    tail = [QueuedJob(j.pk, "alice", "paid", 1, 0.0, 3600.0) for j in jobs]
    pending = PendingReasons({jobs[0].pk: SOON})
    pending.add_run(tail, 1, run_reason)
    return pending


def _stored(jobs: list[Job]) -> list[tuple]:
    rows = Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk")
    return [(j.pending_code, j.estimated_start is not None) for j in rows]


@pytest.fixture(params=[True, False], ids=["one-statement", "orm"])
def write(request):
    return lambda pending: write_reasons(pending, bulk=request.param)


def test_reasons_are_written_once_then_left_alone(alice, write) -> None:
    jobs = [make_job(alice) for _ in range(5)]
    assert write(_pending(jobs, BUSY)) == 5
    assert _stored(jobs) == [("resources", True)] + [("priority", False)] * 4
    assert write(_pending(jobs, BUSY)) == 0


def test_only_the_changed_part_of_a_reason_is_enough_to_rewrite(alice, write) -> None:
    jobs = [make_job(alice) for _ in range(4)]
    write(_pending(jobs, BUSY))
    # only the estimate differs, and the stored one is NULL: SQL's NULL = x is not false
    assert write(_pending(jobs, DATED)) == 3
    assert _stored(jobs) == [("resources", True)] + [("priority", True)] * 3
    assert write(_pending(jobs, DATED)) == 0
    assert write(_pending(jobs, BUSY)) == 3
    assert write(_pending(jobs, SOON)) == 3


def test_a_job_that_left_the_queue_keeps_its_row(alice, write) -> None:
    jobs = [make_job(alice) for _ in range(3)]
    Job.objects.filter(pk=jobs[2].pk).update(state="CANCELLED")
    assert write(_pending(jobs, BUSY)) == 2
    assert Job.objects.get(pk=jobs[2].pk).pending_code != "priority"


def test_the_tick_commit_writes_them(alice) -> None:
    jobs = [make_job(alice) for _ in range(3)]
    report = apply_decisions(Decisions(pending=_pending(jobs, BUSY)), timezone.now())
    assert report.reasons_written == 3
    assert _stored(jobs) == [("resources", True)] + [("priority", False)] * 2
