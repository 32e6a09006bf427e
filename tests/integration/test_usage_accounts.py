"""Decayed usage: every ended attempt is counted once, decayed from its end, however often
and however many processes fold; the tick ranks organizations by it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.fencing import next_token
from jobs.models import Attempt, Job, RunTimeStat, UsageAccount
from jobs.scheduler.tick import scheduler_tick_run
from jobs.scheduler.usage import fold_ended_attempts, load_usage
from jobs.services.tenancy import organization_create
from tests.support.factories import make_job, make_node
from tests.support.threads import race
from workers.models import Node, NodeState

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = 3600.0


def _attempt(job: Job, gpus: int, started, ended=None) -> Attempt:
    """An attempt as history has it, on a node of its own that takes no more work."""
    node = make_node(f"u{Attempt.objects.count()}", gpus=gpus)
    Node.objects.filter(pk=node.pk).update(state=NodeState.DOWN)
    return Attempt.objects.create(job=job, node=node, gpu_indices=list(range(gpus)),
                                  token=next_token(), status="ENDED" if ended else "RUNNING",
                                  started_at=started, ended_at=ended)


def test_each_attempt_counts_once_decayed_from_its_end(alice):
    now = timezone.now()
    job = make_job(alice)
    _attempt(job, 2, now - timedelta(hours=7), now - timedelta(hours=6))  # 7200 GPU-s, halved
    _attempt(job, 1, now - timedelta(seconds=100), now)  # 100
    _attempt(make_job(alice), 4, now - timedelta(seconds=50))  # running: 200, not decayed
    assert fold_ended_attempts(now, 6 * HOUR) == 2
    assert fold_ended_attempts(now, 6 * HOUR) == 0  # already counted
    usage = load_usage(now, 6 * HOUR)
    assert usage.org["alice"] == pytest.approx(3600 + 100 + 200)
    assert usage.project[("alice", job.project.name)] == pytest.approx(3900)
    # an hour later, one more attempt has ended: the account is decayed, then added to
    later = now + timedelta(hours=6)
    _attempt(job, 1, later - timedelta(seconds=10), later)
    assert fold_ended_attempts(later, 6 * HOUR) == 1
    usage = load_usage(later, 6 * HOUR)
    assert usage.org["alice"] == pytest.approx(1800 + 50 + 10 + 4 * (6 * HOUR + 50))


def test_the_snapshot_counts_running_attempts_as_the_usage_read_does(alice, bob):
    """The tick reads live attempts once for the running jobs and their usage."""
    from django.contrib.auth import get_user_model

    from jobs.scheduler.snapshot import load_snapshot

    now = timezone.now()
    user = get_user_model().objects.create(username="carol")
    Job.objects.filter(pk=(job := make_job(alice)).pk).update(submitted_by=user)
    _attempt(job, 2, now - timedelta(seconds=30))
    _attempt(make_job(bob), 4, now - timedelta(seconds=50))
    Attempt.objects.filter(pk=_attempt(make_job(bob), 1, None).pk).update(started_at=None)
    snapshot, usage = load_snapshot(now), load_usage(now, 6 * HOUR)
    assert (snapshot.usage, snapshot.project_usage, snapshot.user_usage) == (
        usage.org, usage.project, usage.user)
    assert usage.org == pytest.approx({"alice": 60, "bob": 200})  # the unstarted one: nothing
    assert usage.user[("alice", job.project.name, str(user.pk))] == pytest.approx(60)


def test_racing_folds_count_every_attempt_exactly_once(alice):
    """In the usage accounts and, as each is a job's whole run, in the learned run times."""
    now = timezone.now()
    node = make_node("n1", gpus=1)
    Node.objects.filter(pk=node.pk).update(state=NodeState.DOWN)
    Attempt.objects.bulk_create(
        Attempt(job=make_job(alice), node=node, gpu_indices=[0], token=next_token(),
                status="ENDED", outcome="SUCCEEDED", started_at=now - timedelta(seconds=10),
                ended_at=now) for _ in range(400))
    Job.objects.update(state="SUCCEEDED")
    errors = []

    def fold():
        try:
            while fold_ended_attempts(now, 6 * HOUR, batch=25):
                pass
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    race(fold, 4)
    assert errors == []
    assert not Attempt.objects.filter(usage_counted=False).exists()
    assert UsageAccount.objects.get().gpu_seconds == pytest.approx(4000)
    assert [s.runs for s in RunTimeStat.objects.all()] == [400, 400]  # the project's, fleet's


def test_the_tick_serves_the_org_that_used_less_first(tiers):
    bob, carol = (organization_create(slug=s, tier="paid") for s in ("bob-paid", "carol"))
    heavy = make_job(bob)
    now = timezone.now()
    _attempt(heavy, 8, now - timedelta(hours=2), now - timedelta(minutes=10))
    Job.objects.filter(pk=heavy.pk).update(state="SUCCEEDED")
    old = make_job(bob)  # older than carol's: it would go first without bob's usage
    Job.objects.filter(pk=old.pk).update(enqueued_at=now - timedelta(minutes=5))
    new = make_job(carol)
    make_node("n1", gpus=1)
    scheduler_tick_run()
    assert Job.objects.get(pk=new.pk).state == "SCHEDULED"
    assert Job.objects.get(pk=old.pk).state == "QUEUED"


def _submitted_by(job: Job, user) -> Job:
    Job.objects.filter(pk=job.pk).update(submitted_by=user)
    job.refresh_from_db()
    return job


def test_each_submitter_of_a_project_has_an_account(alice, django_user_model):
    now = timezone.now()
    ann, ben = (django_user_model.objects.create_user(name) for name in ("ann", "ben"))
    for user, gpus in ((ann, 1), (ben, 2), (ann, 3), (None, 4)):
        _attempt(_submitted_by(make_job(alice), user), gpus, now - timedelta(seconds=10), now)
    assert fold_ended_attempts(now, 6 * HOUR) == 4
    accounts = {a.user_id: a.gpu_seconds for a in UsageAccount.objects.all()}
    assert accounts == {ann.pk: 40.0, ben.pk: 20.0, None: 40.0}
    _attempt(_submitted_by(make_job(alice), ben), 1, now - timedelta(seconds=50))  # running
    usage = load_usage(now, 6 * HOUR)
    project = make_job(alice).project.name
    assert usage.project[("alice", project)] == pytest.approx(150)
    assert usage.user == pytest.approx({("alice", project, str(ann.pk)): 40,
                                        ("alice", project, str(ben.pk)): 70,
                                        ("alice", project, ""): 40})


def test_the_tick_serves_the_user_that_used_less_first(alice, django_user_model):
    heavy, light = (django_user_model.objects.create_user(name) for name in ("hal", "lea"))
    now = timezone.now()
    used = _submitted_by(make_job(alice), heavy)
    _attempt(used, 8, now - timedelta(hours=2), now - timedelta(minutes=10))
    Job.objects.filter(pk=used.pk).update(state="SUCCEEDED")
    old = _submitted_by(make_job(alice), heavy)  # older: it would go first without the usage
    Job.objects.filter(pk=old.pk).update(enqueued_at=now - timedelta(minutes=5))
    new = _submitted_by(make_job(alice), light)
    assert old.project_id == new.project_id
    make_node("n1", gpus=1)
    scheduler_tick_run()
    assert Job.objects.get(pk=new.pk).state == "SCHEDULED"
    assert Job.objects.get(pk=old.pk).state == "QUEUED"


def test_the_tick_weighs_users_by_their_membership_weight(alice, django_user_model):
    from jobs.models import Membership

    lead, intern = (django_user_model.objects.create_user(name) for name in ("lee", "ina"))
    Membership.objects.create(user=lead, organization=alice, weight=3.0)
    Membership.objects.create(user=intern, organization=alice)
    now = timezone.now()
    for user in (lead, intern):  # the same GPU-time used by each
        used = _submitted_by(make_job(alice), user)
        _attempt(used, 4, now - timedelta(hours=1), now - timedelta(minutes=5))
        Job.objects.filter(pk=used.pk).update(state="SUCCEEDED")
    old = _submitted_by(make_job(alice), intern)  # older: it would go first without weights
    Job.objects.filter(pk=old.pk).update(enqueued_at=now - timedelta(minutes=5))
    new = _submitted_by(make_job(alice), lead)
    make_node("n1", gpus=1)
    scheduler_tick_run()
    assert Job.objects.get(pk=new.pk).state == "SCHEDULED"
    assert Job.objects.get(pk=old.pk).state == "QUEUED"
