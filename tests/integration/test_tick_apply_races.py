"""A round decides on a snapshot and commits later: whatever changed in between wins. A node
cordoned or a GPU taken out since gets no job, and a preemptor that stopped waiting stops
no victim. After the commit, a broker that takes no message loses no job."""

import pytest
from django.utils import timezone

from jobs import policy as P
from jobs.models import Attempt, GpuBinding, Job
from jobs.scheduler.apply import apply_decisions
from jobs.scheduler.snapshot import load_snapshot
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from tests.integration.test_preemption_nomination import _enterprise_preempts_free_work
from tests.support.factories import make_job, make_node
from workers.models import Gpu, Node
from workers.services.fleet import gpu_take_out, node_cordon

pytestmark = pytest.mark.django_db(transaction=True)


def _decided(job_ids: list[int]) -> tuple[P.Decisions, object]:
    now = timezone.now()
    decisions = P.decide(load_snapshot(now))
    assert sorted(p.job_id for p in decisions.placements) == sorted(job_ids)
    return decisions, now


@pytest.mark.parametrize("change", ["cordon", "gpu"])
def test_a_node_closed_after_the_round_read_it_gets_no_job(alice, change):
    make_node("n1", gpus=2)
    make_node("n2", gpus=2)
    jobs = [make_job(alice, gpus=2).pk for _ in range(2)]
    decisions, now = _decided(jobs)
    if change == "cordon":
        node_cordon(Node.objects.get(name="n1"))
    else:
        gpu_take_out(Gpu.objects.get(node__name="n1", index=1), by="op")
    report = apply_decisions(decisions, now)
    assert (report.placed, report.refused) == (1, 1)
    bound = set(GpuBinding.objects.values_list("gpu__node__name", flat=True))
    assert bound == {"n2"}  # the other job still placed, in the same round
    assert Job.objects.filter(pk__in=jobs, state="QUEUED").count() == 1


def _preemption_decided(bob, settings) -> tuple[Attempt, Job, P.Decisions, object]:
    """bob's job runs on n1 (two GPUs of four); carol's enterprise job wants all four, and
    a round decides to preempt bob's, not committed yet."""
    victim, urgent = _enterprise_preempts_free_work(bob, settings, node_gpus=2)
    # undo that round's preemption, so that a new round decides it again
    Attempt.objects.filter(pk=victim.pk).update(stop_requested="", stop_deadline=None,
                                                preempted_for=None)
    Job.objects.filter(pk=victim.job_id).update(state="RUNNING")
    Job.objects.filter(pk=urgent.pk).update(nominated_node=None, nominated_gpus=[])
    now = timezone.now()
    decisions = P.decide(load_snapshot(now))
    assert [p.attempt_id for p in decisions.preemptions] == [victim.pk]
    return victim, urgent, decisions, now


def test_a_preemptor_cancelled_after_the_round_stops_no_victim(bob, settings):
    victim, urgent, decisions, now = _preemption_decided(bob, settings)
    job_cancel(job=urgent)
    report = apply_decisions(decisions, now)
    assert report.preempted == 0
    victim.refresh_from_db()
    assert victim.stop_requested == "" and Job.objects.get(pk=victim.job_id).state == "RUNNING"


@pytest.fixture
def broker_away(monkeypatch):
    """The service's Celery app sends to a port nothing listens on (a broker down)."""
    from gpusched.celery import app

    away = "redis://127.0.0.1:1/0"
    monkeypatch.setenv("CELERY_BROKER_URL", away)  # the environment's, read first
    monkeypatch.setattr(app.conf, "broker_url", away)
    app._after_fork()  # drop the pools of connections to the broker that answers
    yield
    monkeypatch.undo()
    app._after_fork()


def test_placements_whose_messages_the_broker_refused_queue_again_without_a_retry(
        alice, broker_away, settings):
    settings.GPUSCHED_MAX_RETRIES = 0  # a try counted would dead-letter them
    make_node("n1", gpus=2)
    make_node("n2", gpus=2)
    jobs = [make_job(alice, gpus=2).pk for _ in range(2)]
    scheduler_tick_run()  # commits both placements; neither send reaches a node
    assert Job.objects.filter(pk__in=jobs, state="SCHEDULED").count() == 2
    Attempt.objects.update(lease_expires_at="2000-01-01T00:00:00Z")  # nobody started them
    scheduler_tick_run()
    for job in Job.objects.filter(pk__in=jobs):
        assert (job.retries, job.error_code) == (0, "")
        assert job.state in ("RETRY_WAIT", "QUEUED", "SCHEDULED")  # not DEAD: it never ran
