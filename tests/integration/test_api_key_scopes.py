"""A key does what its scope allows and nothing more: a read key reads every call, a jobs key
runs jobs but leaves webhooks, projects and members alone, a full key does all; a refusal is 403
insufficient_scope, names the scope needed and changes nothing. Every documented call is
tried with every scope, so a call added without a thought for scopes is closed to narrow
keys (its view names none: it needs full)."""

import re

import pytest
from rest_framework.test import APIClient

from credits.models import Budget, Transfer
from jobs.models import (
    ApiKey,
    Job,
    JobEvent,
    Membership,
    Organization,
    OrganizationEvent,
    Project,
    WebhookDelivery,
    WebhookEndpoint,
)
from jobs.services.tenancy import api_key_issue
from jobs.services.webhook_endpoints import webhook_endpoint_create
from jobs.services.webhooks import notify_job_moved
from tests.support.factories import make_job, make_member

pytestmark = pytest.mark.django_db
RANK = {"read": 0, "jobs": 1, "full": 2}
BODIES = {("post", "/api/v1/jobs"): {"prompt": "a fox"},
          ("patch", "/api/v1/jobs/{job_id}"): {"urgency_s": 60},
          ("post", "/api/v1/jobs/cancel"): {"label": ["step:render"]},
          ("post", "/api/v1/jobs/batch"): {"jobs": [{"prompt": "a fox"}]},
          ("post", "/api/v1/jobs/hold"): {"label": ["step:render"]},
          ("post", "/api/v1/jobs/release"): {"label": ["step:render"]},
          ("post", "/api/v1/webhooks"): {"url": "http://127.0.0.1:9/gpusched"},
          ("post", "/api/v1/projects"): {"name": "ads", "running_gpu_cap": 2},
          ("patch", "/api/v1/projects/{name}"): {"weight": 4, "monthly_limit": 10},
          ("patch", "/api/v1/organization"): {"low_credits_threshold": 5, "monthly_limit": 1},
          ("patch", "/api/v1/members/{username}"): {"weight": 3, "monthly_limit": 10}}


@pytest.fixture(autouse=True)
def loopback_hooks(settings):
    """Endpoints on loopback: nothing here resolves other names, and nothing is sent."""
    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True


def _client(org, scope: str) -> APIClient:
    api = APIClient()
    raw = api_key_issue(organization=org, name=scope, scope=scope)[1]
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return api


def _world() -> tuple:
    """What a refused call must leave as it was."""
    return (Job.objects.count(), JobEvent.objects.count(), Transfer.objects.count(),
            WebhookEndpoint.objects.count(), OrganizationEvent.objects.count(),
            sorted(Job.objects.values_list("pk", "state", "version", "urgency_s", "hold")),
            sorted(WebhookDelivery.objects.values_list("pk", "status", "attempts")),
            sorted(WebhookEndpoint.objects.values_list("pk", "secret")),
            sorted(Project.objects.values_list("pk", "weight", "running_gpu_cap")),
            sorted(Budget.objects.values_list("pk", "monthly_limit")),
            sorted(Membership.objects.values_list("pk", "weight", "running_gpu_cap")),
            Organization.objects.values_list("low_credits_threshold", flat=True).get(
                slug="alice"))


@pytest.fixture
def calls(client, alice):
    """(method, path, concrete URL, least scope) of every call the OpenAPI document names,
    with ids of real objects of alice's."""
    job = make_job(alice)
    make_member(alice, "mia")
    hook = webhook_endpoint_create(organization=alice, url="http://127.0.0.1:9/a",
                                   events=["job.cancelled"],
                                   api_key=ApiKey.objects.get(organization=alice))
    Job.objects.filter(pk=job.pk).update(state="CANCELLED")
    notify_job_moved(Job.objects.get(pk=job.pk))
    Job.objects.filter(pk=job.pk).update(state="QUEUED")
    delivery = WebhookDelivery.objects.get(endpoint=hook)
    ids = {"job_id": job.pk, "hook_id": hook.pk, "delivery_id": delivery.pk,
           "attempt_id": 1, "name": "default", "username": "mia"}
    document = client.get("/api/v1/openapi.json").json()
    return [(method, path, re.sub(r"\{(\w+)\}", lambda m: str(ids[m.group(1)]), path),
             operation["x-key-scope"])
            for path, operations in document["paths"].items()
            for method, operation in operations.items()]


def test_the_document_names_the_scopes_the_views_ask():
    from django.test import Client

    paths = Client().get("/api/v1/openapi.json").json()["paths"]
    scopes = {(m, p): op["x-key-scope"] for p, ops in paths.items() for m, op in ops.items()}
    assert {k for k, v in scopes.items() if v == "jobs"} == {
        ("post", "/api/v1/jobs"), ("patch", "/api/v1/jobs/{job_id}"),
        ("post", "/api/v1/jobs/cancel"), ("post", "/api/v1/jobs/{job_id}/cancel"),
        ("post", "/api/v1/jobs/{job_id}/hold"), ("post", "/api/v1/jobs/{job_id}/release"),
        ("post", "/api/v1/jobs/hold"), ("post", "/api/v1/jobs/release"),
        ("post", "/api/v1/jobs/batch"), ("post", "/api/v1/jobs/{job_id}/erase"),
        ("post", "/api/v1/jobs/erase")}
    assert all(v == "read" for (m, _), v in scopes.items() if m == "get")
    assert all(v == "full" for (m, p), v in scopes.items() if m != "get" and p.startswith(
        ("/api/v1/webhooks", "/api/v1/projects", "/api/v1/organization", "/api/v1/members")))


@pytest.mark.parametrize("scope", ["read", "jobs"])
def test_a_narrow_key_is_refused_every_call_past_its_scope_and_nothing_changes(
        alice, calls, scope):
    api = _client(alice, scope)
    refused = [(m, p, url) for m, p, url, needed in calls if RANK[needed] > RANK[scope]]
    assert refused  # each narrow scope has calls it may not make
    for method, path, url in refused:
        before = _world()
        answer = getattr(api, method)(url, BODIES.get((method, path), {}), format="json")
        assert answer.status_code == 403, (method, path, answer.content)
        error = answer.json()["error"]
        assert error["code"] == "insufficient_scope" and scope in error["message"]
        assert _world() == before, (method, path)


@pytest.mark.parametrize("scope", ["read", "jobs", "full"])
def test_a_key_makes_every_call_its_scope_allows(alice, calls, scope):
    api = _client(alice, scope)
    for method, path, url, needed in calls:
        if RANK[needed] <= RANK[scope]:
            answer = getattr(api, method)(url, BODIES.get((method, path), {}), format="json")
            assert answer.status_code != 403, (method, path, answer.content)
            assert answer.status_code < 500


def test_a_jobs_key_runs_a_job_from_submission_to_cancel(alice):
    api = _client(alice, "jobs")
    job = api.post("/api/v1/jobs", {"prompt": "a fox", "gpus": 2}, format="json").json()
    changed = api.patch(job["url"], {"gpus": 1}, format="json")
    assert changed.status_code == 200 and changed.json()["gpus"] == 1
    assert api.post(f"{job['url']}/cancel").json()["state"] == "CANCELLED"


def test_keys_made_before_scopes_may_do_everything(alice, api):
    assert ApiKey.objects.get(name="ci").scope == "full"
    made = api.post("/api/v1/webhooks", {"url": "http://127.0.0.1:9/b"}, format="json")
    assert made.status_code == 201


def test_an_owner_makes_a_read_key_on_the_dashboard(owner, alice):
    answer = owner.post("/dashboard/keys/alice", {"name": "grafana", "scope": "read"})
    raw = re.search(r'class="new-key">([^<]+)<', answer.content.decode()).group(1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.get("/api/v1/jobs").status_code == 200
    assert api.post("/api/v1/jobs", {"prompt": "x"}, format="json").status_code == 403
    assert ApiKey.objects.get(name="grafana").scope == "read"
    event = OrganizationEvent.objects.get(action="api_key.made")
    assert event.detail["scope"] == "read"
    assert "<td>read</td>" in owner.get("/dashboard/keys").content.decode()


def test_operators_see_refusals_by_scope_on_metrics(alice, client, clean_cache):
    _client(alice, "read").post("/api/v1/jobs", {"prompt": "x"}, format="json")
    assert 'gpusched_requests_refused_total{code="insufficient_scope"} 1' in client.get(
        "/metrics").content.decode()


def test_an_unknown_scope_is_refused_and_makes_no_key(owner, alice):
    answer = owner.post("/dashboard/keys/alice", {"name": "odd", "scope": "admin"})
    assert answer.status_code == 400 and "scope" in answer.content.decode()
    assert not ApiKey.objects.filter(name="odd").exists()
