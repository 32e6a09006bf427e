"""`GET /api/v1/organization` tells a client each of its limits beside what it uses of it,
as the checks that refuse it count: a client that stays under the figures is not refused, and
one that reaches a limit sees it reached before its next request is."""

import time

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from jobs.models import ApiKey, Job, Tier
from jobs.scheduler.backlog import BACKLOG_KEY
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.tenancy import api_key_issue
from tests.support.factories import make_job, make_member, make_node

pytestmark = pytest.mark.django_db


def _standing(api: APIClient) -> dict:
    answer = api.get("/api/v1/organization")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_it_names_the_organization_its_tier_and_the_key_in_use(alice):
    key, raw = api_key_issue(organization=alice, name="grafana", scope="read",
                             user=make_member(alice, "mia"))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    body = _standing(api)
    assert (body["slug"], body["tier"]["name"], body["tier"]["preemptible"]) == (
        "alice", "paid", True)
    assert body["key"] == {"prefix": f"{key.prefix}…", "name": "grafana", "scope": "read",
                           "user": "mia", "expires_at": None}


def test_the_waiting_jobs_limit_is_the_one_admission_refuses_at(api, alice):
    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=2)
    for _ in range(2):
        before = _standing(api)
        assert before["usage"]["waiting_jobs"] < before["limits"]["waiting_jobs"]
        assert api.post("/api/v1/jobs", {"prompt": "x"}, format="json").status_code == 202
    full = _standing(api)
    assert full["usage"]["waiting_jobs"] == full["limits"]["waiting_jobs"] == 2
    refused = api.post("/api/v1/jobs", {"prompt": "x"}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (429, "queue_full")


def test_running_gpus_count_live_bindings_only(api, alice, bob):
    make_node("n1", gpus=8)
    make_job(alice, gpus=2)
    make_job(alice, gpus=4)
    make_job(bob, gpus=1)
    scheduler_tick_run()
    assert _standing(api)["usage"]["running_gpus"] == 6
    assert _standing(api)["usage"]["waiting_jobs"] == 0
    job = Job.objects.filter(organization=alice, gpus=4).get()
    job_cancel(job=job)  # placed, never started: its GPUs go back at once
    assert _standing(api)["usage"]["running_gpus"] == 2


def test_the_running_gpu_cap_is_the_organizations_else_its_tiers(api, alice):
    Tier.objects.filter(name="paid").update(max_running_gpus_per_org=32)
    assert _standing(api)["limits"]["running_gpus"] == 32
    alice.running_gpu_cap = 0  # an operator stops the organization's new work
    alice.save()
    assert _standing(api)["limits"]["running_gpus"] == 0


def test_a_cap_of_0_stops_new_work_where_the_tier_has_no_cap(api, alice):
    alice.running_gpu_cap = 0
    alice.save()
    assert _standing(api)["limits"]["running_gpus"] == 0
    make_node("n1", gpus=8)
    job = make_job(alice)
    scheduler_tick_run()  # the round reads the same cap: 0 is a cap, not "none"
    job.refresh_from_db()
    assert (job.state, job.pending_code) == ("QUEUED", "org_cap")


def test_requests_are_counted_as_the_rate_limit_counts_them(api, alice, clean_cache):
    Tier.objects.filter(name="paid").update(api_requests_per_min=5)
    for _ in range(2):
        api.get("/api/v1/jobs")
    body = _standing(api)  # this request counts too
    assert (body["usage"]["requests_per_min"], body["limits"]["requests_per_min"]) == (3, 5)
    api.get("/api/v1/jobs")
    api.get("/api/v1/jobs")
    assert api.get("/api/v1/jobs").status_code == 429


def test_the_backlog_is_the_tiers_as_the_last_round_published_it(api, clean_cache):
    assert _standing(api)["usage"]["backlog_s"] is None
    cache.set(BACKLOG_KEY, {"at": time.time(), "seconds": {"paid": 1200.0}})
    body = _standing(api)
    assert body["usage"]["backlog_s"] == 1200.0
    assert body["limits"]["backlog_s"] == Tier.objects.get(name="paid").shed_after_backlog_s


def test_keys_and_webhooks_count_live_ones(api, alice, settings):
    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True
    key, _ = api_key_issue(organization=alice, name="old")
    ApiKey.objects.filter(pk=key.pk).update(revoked_at="2026-01-01T00:00Z")
    api.post("/api/v1/webhooks", {"url": "http://127.0.0.1:9/h"}, format="json")
    usage = _standing(api)["usage"]
    assert (usage["live_keys"], usage["webhooks"]) == (1, 1)
