"""A job's end releases the jobs held after it, and settles its credits; the jobs after it
are cancelled, held, released or shortened meanwhile, each settling credits of its own.
Attacked: the two racing, with prices set (invariant 5's lock order: a job's row and the
rows of the jobs after it before any ledger row), which must never deadlock."""

from functools import partial

import pytest

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from jobs.models import Job
from jobs.services.cancellation import job_cancel
from jobs.services.job_hold import job_hold
from jobs.services.submission import JobSpec, job_submit
from jobs.services.time_limits import job_set_time_limit
from jobs.states import TERMINAL
from tests.support.factories import make_node, start_placed
from tests.support.ledger import assert_ledger_consistent
from tests.support.race import race
from workers.services.attempts import AttemptResult, attempt_finish

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def priced(alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=10**7)
    make_node("n1", gpus=8)
    return alice


ACTS = {
    "cancel": lambda job: job_cancel(job=job),
    "hold": lambda job: job_hold(job=job, by="client"),
    "shorten": lambda job: job_set_time_limit(job=job, time_limit_s=300, by="client"),
}


@pytest.mark.parametrize("act", ACTS)
def test_an_end_racing_a_change_of_the_job_after_it_never_deadlocks(priced, act):
    for _ in range(12):
        first = job_submit(organization=priced, spec=JobSpec(prompt="a", time_limit_s=600))
        after = job_submit(organization=priced, spec=JobSpec(prompt="b", time_limit_s=600,
                                                             after=(first.pk,)))
        attempt = start_placed(first)
        errors = race(partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                              result=AttemptResult("SUCCEEDED", 0)),
                      partial(ACTS[act], Job.objects.get(pk=after.pk)))
        assert [e for e in errors if getattr(e, "code", "") != "busy"] == []
        assert Job.objects.get(pk=first.pk).state == "SUCCEEDED"
        _cancel_the_rest()
    assert_ledger_consistent()


def test_a_submission_after_a_job_racing_its_end_never_deadlocks(priced):
    for _ in range(12):
        first = job_submit(organization=priced, spec=JobSpec(prompt="a", time_limit_s=600))
        attempt = start_placed(first)
        errors = race(partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                              result=AttemptResult("SUCCEEDED", 0)),
                      partial(job_submit, organization=priced, spec=JobSpec(
                          prompt="b", time_limit_s=600, after=(first.pk,))))
        assert errors == []
        assert not Job.objects.filter(state="HELD").exists()  # queued, after it or at once
        _cancel_the_rest()
    assert_ledger_consistent()


def _cancel_the_rest() -> None:
    """The jobs after it leave the node to the next round's."""
    for job in Job.objects.exclude(state__in=TERMINAL):
        job_cancel(job=job)


def test_a_failure_cancelling_a_chain_racing_a_cancel_at_its_end_never_deadlocks(priced):
    """The failure cancels the job after it, which cancels the one after that: the end
    locks the whole chain before the ledger, not one link at a time."""
    for _ in range(10):
        first = job_submit(organization=priced, spec=JobSpec(prompt="a", time_limit_s=600))
        second = job_submit(organization=priced, spec=JobSpec(prompt="b", time_limit_s=600,
                                                              after=(first.pk,)))
        third = job_submit(organization=priced, spec=JobSpec(prompt="c", time_limit_s=600,
                                                             after=(second.pk,)))
        attempt = start_placed(first)
        errors = race(partial(attempt_finish, attempt_id=attempt.pk, token=attempt.token,
                              result=AttemptResult("FAILED", 2, "usage", None, "exit_2")),
                      partial(job_cancel, job=Job.objects.get(pk=third.pk)))
        assert errors == []
        assert {Job.objects.get(pk=j.pk).state for j in (second, third)} == {"CANCELLED"}
    assert_ledger_consistent()
