"""The one state machine: illegal moves and lost races are refused and say so."""

import threading

import pytest
from django.db import connection

from jobs.models import Job, JobEvent
from jobs.states import ALLOWED, TERMINAL, JobState
from jobs.transitions import IllegalTransition, LostRace, transition
from tests.support.factories import make_job


def test_terminal_states_have_no_way_out():
    assert all(not ALLOWED[s] for s in TERMINAL)


@pytest.mark.django_db
def test_an_illegal_move_is_refused_before_the_database(alice):
    job = make_job(alice)
    with pytest.raises(IllegalTransition):
        transition(job, JobState.SUCCEEDED)
    assert Job.objects.get(pk=job.pk).state == JobState.QUEUED


@pytest.mark.django_db
def test_a_stale_copy_loses_the_race_and_writes_nothing(alice):
    job = make_job(alice)
    stale = Job.objects.get(pk=job.pk)
    transition(job, JobState.CANCELLED, reason="user asked")
    with pytest.raises(LostRace):
        transition(stale, JobState.SCHEDULED)
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    assert list(JobEvent.objects.filter(job=job).values_list("to_state", flat=True)) == [
        "QUEUED", "CANCELLED"]
    assert Job.objects.get(pk=job.pk).finished_at is not None  # an end always has a time


@pytest.mark.django_db(transaction=True)
def test_concurrent_moves_from_one_state_let_exactly_one_win(alice):
    job = make_job(alice)
    outcomes: list[str] = []

    def move(to):
        copy = Job.objects.get(pk=job.pk)
        barrier.wait()
        try:
            transition(copy, to)
            outcomes.append(f"won {to}")
        except LostRace:
            outcomes.append("lost")
        finally:
            connection.close()

    targets = [JobState.SCHEDULED, JobState.CANCELLED] * 4
    barrier = threading.Barrier(len(targets))
    threads = [threading.Thread(target=move, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(o.startswith("won") for o in outcomes) == 1
    job.refresh_from_db()
    assert job.version == 1 and JobEvent.objects.filter(job=job).count() == 2


@pytest.mark.django_db(transaction=True)
def test_each_committed_move_is_logged_with_its_fields_and_a_rolled_back_one_is_not(alice,
                                                                                   caplog):
    from django.db import transaction

    job = make_job(alice)
    caplog.set_level("INFO", logger="jobs.transitions")
    with pytest.raises(RuntimeError), transaction.atomic():
        transition(job, JobState.CANCELLED, reason="never happened")
        raise RuntimeError
    job = Job.objects.get(pk=job.pk)
    transition(job, JobState.CANCELLED, reason="by the client")
    moves = [r for r in caplog.records if r.name == "jobs.transitions"]
    assert [(r.job_id, r.from_state, r.to_state) for r in moves] == [
        (job.pk, "QUEUED", "CANCELLED")]
    assert moves[0].getMessage() == f"job {job.pk}: QUEUED → CANCELLED (by the client)"
