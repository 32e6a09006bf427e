"""Admission: past its queue limit or while the fleet is overloaded a tier's new jobs get a 429
with a Retry-After, the lowest tier first, and nothing is queued for a refused request."""

import pytest
from rest_framework.test import APIClient

from jobs.models import Job, Tier
from jobs.scheduler.backlog import backlog_seconds
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.admission import Refused
from jobs.services.cancellation import job_cancel
from jobs.services.submission import JobSpec, job_submit
from jobs.services.tenancy import api_key_issue, organization_create
from tests.support.broker import purge_broker_and_cache
from tests.support.factories import make_node
from tests.support.threads import race


def _client(org) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_issue(organization=org, name='t')[1]}")
    return client


def _submit(client: APIClient, **body):
    return client.post("/api/v1/jobs", {"prompt": "a fox", **body}, format="json")


@pytest.mark.django_db
def test_past_its_queue_limit_an_organization_gets_a_429_and_nothing_is_queued(alice, api):
    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=2)
    assert [_submit(api).status_code for _ in range(2)] == [202, 202]
    refused = _submit(api)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "queue_full"
    assert int(refused["Retry-After"]) == error["retry_after_s"] >= 1
    assert Job.objects.count() == 2
    # another organization of the tier has its own places
    assert _submit(_client(organization_create(slug="carol", tier="paid"))).status_code == 202
    job_cancel(job=Job.objects.filter(organization=alice).first())  # a place frees up
    assert _submit(api).status_code == 202


@pytest.mark.django_db(transaction=True)
def test_racing_submissions_never_pass_the_queue_limit(alice):
    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=3)
    refused = []

    def submit():
        try:
            job_submit(organization=alice, spec=JobSpec(prompt="x"))
        except Refused:
            refused.append(1)

    race(submit, 10)
    assert (Job.objects.filter(organization=alice).count(), len(refused)) == (3, 7)


@pytest.mark.django_db(transaction=True)
def test_under_overload_the_lowest_tier_is_shed_first_and_told_when_to_retry(alice, bob):
    purge_broker_and_cache()
    Tier.objects.filter(name="free").update(shed_after_backlog_s=600)
    Tier.objects.filter(name="paid").update(shed_after_backlog_s=3600)
    make_node("n1", gpus=1)
    big = organization_create(slug="bigco", tier="enterprise")
    for _ in range(4):
        job_submit(organization=big, spec=JobSpec(prompt="x", time_limit_s=900))
    scheduler_tick_run()  # one starts; three wait: 2,700 GPU-seconds on one GPU
    assert backlog_seconds("free") == backlog_seconds("paid") == pytest.approx(2700)

    refused = _submit(_client(bob))
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "overloaded"
    assert int(refused["Retry-After"]) == 2100  # until the backlog is back to 600 s
    assert not Job.objects.filter(organization=bob).exists()
    accepted = _submit(_client(alice))  # paid tolerates an hour
    # and is told how long the work at its tier and above keeps the fleet busy
    assert (accepted.status_code, accepted.json()["backlog_s"]) == (202, 2700)
    assert _submit(_client(big)).status_code == 202  # enterprise is never shed

    assert _submit(_client(bob)).status_code == 429  # paid's waiting job counts for free too
    for job in Job.objects.filter(state="QUEUED"):
        job_cancel(job=job)
    scheduler_tick_run()
    assert backlog_seconds("free") == 0
    accepted = _submit(_client(bob))
    assert (accepted.status_code, accepted.json()["backlog_s"]) == (202, 0)


def test_no_backlog_is_published_while_no_gpu_is_schedulable():
    from jobs.policy.types import NodeView, QueuedJob, Snapshot, TierSpec
    from jobs.scheduler.backlog import backlog_by_tier

    tiers = {"hi": TierSpec("hi", 2, 1.0, 0.0, 1.0, 30.0),
             "lo": TierSpec("lo", 1, 1.0, 0.0, 1.0, 60.0)}
    queued = [QueuedJob(1, "a", "hi", 2, 0.0, 100.0), QueuedJob(2, "b", "lo", 1, 0.0, 100.0, 40.0)]
    node = NodeView("n1", "H100", 80_000, 4, (0, 1, 2, 3), schedulable=False)
    assert backlog_by_tier(Snapshot(0.0, [node], [], queued, tiers, {})) is None
    up = NodeView("n1", "H100", 80_000, 4, (0, 1, 2, 3))
    # a lower tier waits behind the higher tier's work too; an estimate counts over the limit
    assert backlog_by_tier(Snapshot(0.0, [up], [], queued, tiers, {})) == {"hi": 50.0, "lo": 60.0}
    started = backlog_by_tier(Snapshot(0.0, [up], [], queued, tiers, {}), {1})
    assert started == {"hi": 0.0, "lo": 10.0}
