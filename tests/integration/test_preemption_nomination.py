"""GPUs being freed by preemption are promised to one job: nobody preempts for it twice and
nothing else is placed on them."""

from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from jobs import policy as P
from jobs.models import Attempt, Job, Tier
from jobs.scheduler.apply import place
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.tenancy import organization_create
from tests.support.factories import make_job, make_node
from workers.models import Gpu, Node, NodeState
from workers.services.attempts import AttemptResult, attempt_finish, attempt_start

pytestmark = pytest.mark.django_db(transaction=True)


def _free_work_is_preemptible(settings) -> None:
    settings.GPUSCHED_PREEMPT_MIN_RUNTIME_S = 0
    Tier.objects.filter(name="free").update(guaranteed_share=0)


def _started_minutes_ago(*attempts: Attempt) -> None:
    for attempt in attempts:
        attempt_start(attempt_id=attempt.pk, token=attempt.token)
    Attempt.objects.filter(pk__in=[a.pk for a in attempts]).update(
        started_at=timezone.now() - timedelta(minutes=5))


def _enterprise_preempts_free_work(bob, settings, node_gpus: int) -> tuple[Attempt, Job]:
    """bob's 2-GPU checkpointing job runs on n1; carol's enterprise job wants all of n1."""
    _free_work_is_preemptible(settings)
    make_node("n1", gpus=node_gpus)
    victim_job = make_job(bob, gpus=2, checkpointable=True)
    scheduler_tick_run()
    victim = Attempt.objects.get(job=victim_job)
    _started_minutes_ago(victim)
    urgent = make_job(organization_create(slug="carol", tier="enterprise"), gpus=node_gpus)
    scheduler_tick_run()
    victim.refresh_from_db()
    urgent.refresh_from_db()
    return victim, urgent


def test_one_victim_per_preemptor_across_ticks(bob, settings):
    _free_work_is_preemptible(settings)
    make_node("n1", gpus=2)
    make_node("n2", gpus=2)
    free_jobs = [make_job(bob, gpus=2) for _ in range(2)]
    # checkpointable victims get a long grace, so their GPUs stay busy across ticks
    Job.objects.update(checkpointable=True)
    scheduler_tick_run()
    _started_minutes_ago(*Attempt.objects.all())

    urgent = make_job(organization_create(slug="carol", tier="enterprise"), gpus=2)
    for _ in range(3):
        scheduler_tick_run()
    states = sorted(Job.objects.filter(pk__in=[j.pk for j in free_jobs])
                    .values_list("state", flat=True))
    assert states == ["PREEMPTING", "RUNNING"]
    victim = Attempt.objects.get(stop_requested="preempt")
    assert victim.preempted_for_id == urgent.pk
    urgent.refresh_from_db()
    assert urgent.state == "QUEUED" and urgent.pending_code == "preempting"


@pytest.fixture
def nominated(bob, settings):
    """carol's enterprise job preempted bob's free job on n1; the victim is in its grace."""
    victim, urgent = _enterprise_preempts_free_work(bob, settings, node_gpus=2)
    assert victim.stop_requested == "preempt" and victim.preempted_for_id == urgent.pk
    assert (urgent.nominated_node.name, urgent.nominated_gpus) == ("n1", [0, 1])
    return {"urgent": urgent, "victim": victim}


def _victim_stops(victim: Attempt) -> None:
    attempt_finish(attempt_id=victim.pk, token=victim.token,
                   result=AttemptResult("PREEMPTED", 75))


def test_freed_gpus_go_to_their_preemptor_not_to_a_job_ranked_ahead(nominated):
    # an older job of an org as idle as carol's ranks ahead of hers in the enterprise tier
    rival = make_job(organization_create(slug="dave", tier="enterprise"), gpus=2)
    Job.objects.filter(pk=rival.pk).update(enqueued_at=timezone.now() - timedelta(minutes=1))
    scheduler_tick_run()  # the victim still holds n1: nobody starts, nobody else preempts
    assert Attempt.objects.filter(stop_requested="preempt").count() == 1
    _victim_stops(nominated["victim"])
    scheduler_tick_run()
    urgent = Job.objects.get(pk=nominated["urgent"].pk)
    assert urgent.state == "SCHEDULED"
    attempt = Attempt.objects.get(job=urgent, ended_at__isnull=True)
    assert (attempt.node.name, attempt.gpu_indices) == ("n1", [0, 1])
    assert urgent.nominated_node is None
    rival.refresh_from_db()
    assert rival.state == "QUEUED"


def test_a_nomination_on_a_node_that_went_down_is_dropped(nominated):
    Node.objects.filter(name="n1").update(state=NodeState.DRAINING)
    _victim_stops(nominated["victim"])
    scheduler_tick_run()
    urgent = Job.objects.get(pk=nominated["urgent"].pk)
    assert urgent.state == "QUEUED" and urgent.nominated_node is None
    assert urgent.pending_code == "out_of_service"  # back in the queue: its node takes none


def test_free_gpus_in_a_nomination_are_not_lent_while_the_victims_stop(bob, alice, settings):
    # the victim holds n1's GPUs 0-1; 2-3 stay free until the preemptor takes them all
    victim, urgent = _enterprise_preempts_free_work(bob, settings, node_gpus=4)
    assert urgent.nominated_gpus == [0, 1, 2, 3]
    small = make_job(alice, gpus=2)  # would fit on GPUs 2-3 while the victim checkpoints
    scheduler_tick_run()
    small.refresh_from_db()
    assert small.state == "QUEUED"
    _victim_stops(Attempt.objects.get(pk=victim.pk))
    scheduler_tick_run()
    urgent.refresh_from_db()
    assert urgent.state == "SCHEDULED"
    assert Attempt.objects.get(job=urgent, ended_at__isnull=True).gpu_indices == [0, 1, 2, 3]


def test_an_attempt_that_has_not_started_is_not_chosen_as_a_victim(bob, settings):
    """Only a running job can be asked to stop: picking a scheduled one preempts nothing."""
    _free_work_is_preemptible(settings)
    make_node("n1", gpus=2)
    make_node("n2", gpus=2)
    running_job = make_job(bob, gpus=2)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=running_job)
    _started_minutes_ago(attempt)
    make_job(bob, gpus=2)  # scheduled on the other node, not started: it lost nothing yet
    scheduler_tick_run()
    urgent = make_job(organization_create(slug="carol", tier="enterprise"), gpus=2)
    scheduler_tick_run()
    victim = Attempt.objects.get(stop_requested="preempt")
    assert victim.pk == attempt.pk and victim.preempted_for_id == urgent.pk


def test_a_nomination_with_an_unhealthy_gpu_is_dropped(nominated):
    Gpu.objects.filter(node__name="n1", index=1).update(health=Gpu.Health.UNHEALTHY)
    _victim_stops(nominated["victim"])
    scheduler_tick_run()
    urgent = Job.objects.get(pk=nominated["urgent"].pk)
    assert urgent.state == "QUEUED" and urgent.nominated_node is None


def test_a_nomination_whose_gpu_another_attempt_took_is_dropped(bob, alice, settings):
    victim, urgent = _enterprise_preempts_free_work(bob, settings, node_gpus=4)
    intruder = make_job(alice)  # bound to GPU 2 behind the scheduler's back
    place(P.Placement(intruder.pk, (P.Allocation("n1", (2,)),)), timezone.now())
    _victim_stops(victim)
    scheduler_tick_run()
    urgent.refresh_from_db()
    assert urgent.nominated_node is None and urgent.state == "QUEUED"


def test_each_nominee_starts_when_its_own_victims_let_go(bob, settings):
    """Two preemptors on two nodes, judged together: one node frees up, the other not."""
    _free_work_is_preemptible(settings)
    make_node("n1", gpus=2)
    make_node("n2", gpus=2)
    victims_jobs = [make_job(bob, gpus=2, checkpointable=True) for _ in range(2)]
    scheduler_tick_run()
    victims = [Attempt.objects.get(job=job) for job in victims_jobs]
    _started_minutes_ago(*victims)
    carol = organization_create(slug="carol", tier="enterprise")
    urgent = [make_job(carol, gpus=2) for _ in range(2)]
    scheduler_tick_run()
    nodes = dict(Job.objects.filter(pk__in=[j.pk for j in urgent])
                 .values_list("nominated_node__name", "pk"))
    assert set(nodes) == {"n1", "n2"}
    _victim_stops(next(v for v in victims if v.node.name == "n1"))
    scheduler_tick_run()
    states = dict(Job.objects.filter(pk__in=nodes.values()).values_list("pk", "state"))
    assert (states[nodes["n1"]], states[nodes["n2"]]) == ("SCHEDULED", "QUEUED")
    assert Job.objects.get(pk=nodes["n2"]).nominated_node.name == "n2"  # still promised


def test_a_victim_that_copies_its_checkpoint_frees_its_gpus_to_the_preemptor_first(
        nominated):
    """The copy of a large checkpoint takes seconds to minutes: the preemptor starts on the
    GPUs as soon as the victim's binary has ended, while the victim still holds its lease."""
    from jobs.scheduler.snapshot import load_snapshot
    from workers.services.attempts import attempt_free_gpus

    victim, urgent = nominated["victim"], nominated["urgent"]
    assert not attempt_free_gpus(attempt_id=victim.pk, token=victim.token + 1)  # stale
    assert attempt_free_gpus(attempt_id=victim.pk, token=victim.token)
    assert not attempt_free_gpus(attempt_id=victim.pk, token=victim.token)  # once
    scheduler_tick_run()
    urgent.refresh_from_db()
    assert urgent.state == "SCHEDULED"
    live = Attempt.objects.get(job=urgent, ended_at__isnull=True)
    assert (live.node.name, live.gpu_indices) == ("n1", [0, 1])
    victim.refresh_from_db()
    assert victim.ended_at is None  # still copying, its lease its own
    # the next round sees the GPUs as the preemptor's only
    assert [r.attempt_id for r in load_snapshot(timezone.now()).running] == [live.pk]
    copy = default_storage.save(f"checkpoints/job-{victim.job_id}-attempt-{victim.pk}.tar",
                                ContentFile(b"its checkpoint"))
    job = attempt_finish(attempt_id=victim.pk, token=victim.token,
                         result=AttemptResult("PREEMPTED", 75, checkpoint=copy))
    victim.refresh_from_db()
    assert job.state == "QUEUED"
    # billed up to the binary's end, not through the copy
    assert victim.last_checkpoint_at == victim.gpus_freed_at < victim.ended_at
