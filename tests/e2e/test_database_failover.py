"""The database goes away for a few seconds while jobs run (a failover: every connection cut,
new ones refused): nodes supervise their binaries on, heartbeats and reports go through once
it is back, and no try is lost for it (workers/agent/outages.py)."""

import time

import pytest

from jobs.models import Attempt, Job
from tests.support.broker import purge_broker_and_cache
from tests.support.database_cuts import database_away
from tests.support.factories import make_job
from tests.support.fleets import small_fleet
from tests.support.ledger import assert_ledger_consistent
from tests.support.processes import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
OUTAGE_S = 3.0  # under the lease below, over six heartbeats


@pytest.fixture
def fleet(alice):
    purge_broker_and_cache()
    group = small_fleet(alice, "fo", GPUSCHED_LEASE_SECONDS="8",
                        GPUSCHED_NODE_STALE_SECONDS="8")
    yield group
    group.stop_all()


def _ran_once(job: Job) -> Attempt:
    (attempt,) = Attempt.objects.filter(job=job)
    assert (attempt.outcome, Job.objects.get(pk=job.pk).state) == ("SUCCEEDED", "SUCCEEDED")
    return attempt


def test_jobs_run_through_a_database_failover_without_losing_a_try(alice, fleet):
    copying = make_job(alice, run_seconds=12, progress_interval=0.25, checkpoint_every=1)
    ending = make_job(alice, run_seconds=6, progress_interval=0.25)
    wait_for(lambda: Attempt.objects.filter(job=copying, progress__gt=0.2).exists()
             and Attempt.objects.filter(job=ending, progress__gt=0.7).exists(), 60,
             "both jobs well under way")
    with database_away() as cut:
        assert cut > 0  # the node and the scheduler were connected
        time.sleep(OUTAGE_S)  # the shorter job ends meanwhile: its report waits for the database
    wait_for(lambda: Job.objects.filter(pk__in=[copying.pk, ending.pk],
                                        state="SUCCEEDED").count() == 2, 90, "both to succeed")
    _ran_once(ending)
    _ran_once(copying)
    said = "".join(fleet.log_of(name) for name, _, _ in fleet.procs)
    assert "the database did not answer" in said, fleet.logs()
    assert_ledger_consistent()
