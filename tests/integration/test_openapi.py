"""The OpenAPI document names every call the API has, with the methods it answers, and the
answers of real calls, refusals included, are what it says."""

import re

import pytest
from django.conf import settings
from django.urls import URLPattern, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from jobs.api.serializers import JobSubmitSerializer
from jobs.models import Attempt, Tier, WebhookDelivery
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from jobs.services.tenancy import api_key_issue, organization_create
from jobs.transitions import AMENDABLE
from tests.support.factories import make_job, make_member, make_node
from tests.support.openapi import conforms
from workers.services.attempts import attempt_heartbeat, attempt_start
from workers.services.checkpoints import checkpoint_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def document(client):
    answer = client.get("/api/v1/openapi.json")  # no key needed
    assert answer.status_code == 200
    return answer.json()


def _api_routes():
    """(path in OpenAPI form, methods) of every route under /api/v1/."""
    for prefix in get_resolver().url_patterns:
        if str(prefix.pattern) != "api/v1/":
            continue
        for route in prefix.url_patterns:
            assert isinstance(route, URLPattern)
            path = "/api/v1/" + re.sub(r"<\w+:(\w+)>", r"{\1}", str(route.pattern))
            view = route.callback.view_class
            yield path, {m for m in ("get", "post", "put", "patch", "delete") if hasattr(view, m)}


def test_every_route_and_method_is_documented(document):
    routes = dict(_api_routes())
    routes.pop("/api/v1/openapi.json")
    assert {p: set(ops) for p, ops in document["paths"].items()} == routes


def test_the_submit_body_is_the_serializers(document):
    schema = document["components"]["schemas"]["JobSubmit"]
    assert set(schema["properties"]) == set(JobSubmitSerializer().fields)
    assert schema["required"] == ["prompt"]
    assert schema["properties"]["gpus"] == {"type": "integer", "minimum": 1,
                                            "maximum": settings.GPUSCHED_MAX_GPUS_PER_JOB}
    change = document["components"]["schemas"]["JobChange"]
    assert set(change["properties"]) == AMENDABLE and change["required"] == []
    assert change["properties"]["min_gpus"] == {"type": ["integer", "null"], "minimum": 1}


def _check(document, answer, path, method, status):
    operation = document["paths"][path][method]
    assert str(status) in operation["responses"], (path, method, status)
    assert answer.status_code == status, answer.content
    content = operation["responses"][str(status)].get("content", {})
    if "application/json" in content:
        schema = content["application/json"]["schema"]
        assert conforms(answer.json(), schema, document) == []


def test_real_answers_are_what_the_document_says(document, api, alice, settings):
    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True  # no name resolves here
    d = document
    submitted = api.post("/api/v1/jobs", {"prompt": "a crane", "gpus": 2}, format="json")
    _check(d, submitted, "/api/v1/jobs", "post", 202)
    _check(d, api.post("/api/v1/jobs?dry_run=true", {"prompt": "a crane"}, format="json"),
           "/api/v1/jobs", "post", 200)
    job_id = submitted.json()["id"]
    settings.GPUSCHED_POSITIONS_SECONDS = 0  # the round draws the line: the job has a place
    scheduler_tick_run()
    _check(d, api.get("/api/v1/jobs"), "/api/v1/jobs", "get", 200)
    _check(d, api.get("/api/v1/queue"), "/api/v1/queue", "get", 200)
    _check(d, api.get("/api/v1/queue?limit=x"), "/api/v1/queue", "get", 400)
    waiting = api.get(f"/api/v1/jobs/{job_id}")
    assert waiting.json()["pending"]["position"]["place"] == 1
    _check(d, waiting, "/api/v1/jobs/{job_id}", "get", 200)
    changed = api.patch(f"/api/v1/jobs/{job_id}", {"min_gpus": 1}, format="json")
    _check(d, changed, "/api/v1/jobs/{job_id}", "patch", 200)
    _check(d, api.get(f"/api/v1/jobs/{job_id}/events"), "/api/v1/jobs/{job_id}/events", "get",
           200)
    _check(d, api.get("/api/v1/jobs/999999/events"), "/api/v1/jobs/{job_id}/events", "get",
           404)
    _check(d, api.patch(f"/api/v1/jobs/{job_id}", {"prompt": "y"}, format="json"),
           "/api/v1/jobs/{job_id}", "patch", 400)
    _check(d, api.get("/api/v1/jobs/999999"), "/api/v1/jobs/{job_id}", "get", 404)
    _check(d, api.post("/api/v1/jobs/hold", {"label": ["a:b"]}, format="json"),
           "/api/v1/jobs/hold", "post", 200)
    _check(d, api.post("/api/v1/jobs/release", {"label": []}, format="json"),
           "/api/v1/jobs/release", "post", 400)
    held = api.post(f"/api/v1/jobs/{job_id}/hold")
    _check(d, held, "/api/v1/jobs/{job_id}/hold", "post", 200)
    _check(d, api.get(f"/api/v1/jobs/{job_id}"), "/api/v1/jobs/{job_id}", "get", 200)
    _check(d, api.post(f"/api/v1/jobs/{job_id}/release"), "/api/v1/jobs/{job_id}/release",
           "post", 200)
    _check(d, api.post(f"/api/v1/jobs/{job_id}/release"), "/api/v1/jobs/{job_id}/release",
           "post", 409)
    _check(d, api.post(f"/api/v1/jobs/{job_id}/cancel"), "/api/v1/jobs/{job_id}/cancel",
           "post", 202)
    _check(d, api.post(f"/api/v1/jobs/{job_id}/cancel"), "/api/v1/jobs/{job_id}/cancel",
           "post", 202)
    _check(d, api.post(f"/api/v1/jobs/{job_id}/hold"), "/api/v1/jobs/{job_id}/hold", "post",
           409)
    _check(d, api.post("/api/v1/jobs", {"gpus": 99}, format="json"), "/api/v1/jobs", "post",
           400)
    hook = api.post("/api/v1/webhooks", {"url": "http://127.0.0.1:9/hook"}, format="json")
    _check(d, hook, "/api/v1/webhooks", "post", 201)
    _check(d, api.get("/api/v1/webhooks"), "/api/v1/webhooks", "get", 200)
    _check(d, api.get("/api/v1/projects"), "/api/v1/projects", "get", 200)
    _check(d, api.post("/api/v1/projects", {"name": "ads", "running_gpu_cap": 4},
                       format="json"), "/api/v1/projects", "post", 201)
    _check(d, api.post("/api/v1/projects", {"name": "ads"}, format="json"),
           "/api/v1/projects", "post", 409)
    _check(d, api.post("/api/v1/projects", {"name": "Ads"}, format="json"),
           "/api/v1/projects", "post", 400)
    _check(d, api.get("/api/v1/projects/ads"), "/api/v1/projects/{name}", "get", 200)
    _check(d, api.get("/api/v1/projects/none"), "/api/v1/projects/{name}", "get", 404)
    _check(d, api.patch("/api/v1/projects/ads", {"monthly_limit": 9}, format="json"),
           "/api/v1/projects/{name}", "patch", 200)
    _check(d, api.patch("/api/v1/projects/ads", {"name": "b"}, format="json"),
           "/api/v1/projects/{name}", "patch", 400)
    _check(d, api.get("/api/v1/events"), "/api/v1/events", "get", 200)
    _check(d, api.get("/api/v1/events?limit=0"), "/api/v1/events", "get", 400)
    _check(d, api.get("/api/v1/organization"), "/api/v1/organization", "get", 200)
    _check(d, api.patch("/api/v1/organization", {"monthly_limit": 10**6}, format="json"),
           "/api/v1/organization", "patch", 200)
    _check(d, api.patch("/api/v1/organization", {"tier": "free"}, format="json"),
           "/api/v1/organization", "patch", 400)
    _check(d, api.get("/api/v1/gpu-types"), "/api/v1/gpu-types", "get", 200)
    job_cancel(job=make_job(alice))  # a notice owed to the endpoint
    deliveries = f"/api/v1/webhooks/{hook.json()['id']}/deliveries"
    listed = api.get(deliveries)
    _check(d, listed, "/api/v1/webhooks/{hook_id}/deliveries", "get", 200)
    _check(d, api.get(f"{deliveries}?status=LOST"), "/api/v1/webhooks/{hook_id}/deliveries",
           "get", 400)
    _check(d, api.get("/api/v1/webhooks/999999/deliveries"),
           "/api/v1/webhooks/{hook_id}/deliveries", "get", 404)
    WebhookDelivery.objects.update(status="FAILED")
    again = api.post(f"{deliveries}/{listed.json()['results'][0]['id']}/redeliver")
    _check(d, again, "/api/v1/webhooks/{hook_id}/deliveries/{delivery_id}/redeliver", "post",
           202)
    _check(d, api.post(f"{deliveries}/999999/redeliver"),
           "/api/v1/webhooks/{hook_id}/deliveries/{delivery_id}/redeliver", "post", 404)
    _check(d, api.delete(f"/api/v1/webhooks/{hook.json()['id']}"), "/api/v1/webhooks/{hook_id}",
           "delete", 204)
    _check(d, api.post(f"/api/v1/jobs/{job_id}/erase"), "/api/v1/jobs/{job_id}/erase",
           "post", 200)
    _check(d, api.get(f"/api/v1/jobs/{job_id}/output"), "/api/v1/jobs/{job_id}/output",
           "get", 410)
    _check(d, api.post("/api/v1/jobs/erase", {"label": ["a:b"]}, format="json"),
           "/api/v1/jobs/erase", "post", 200)
    _check(d, api.post(f"/api/v1/jobs/{make_job(alice).pk}/erase"),
           "/api/v1/jobs/{job_id}/erase", "post", 409)
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=100)
    _check(d, api.post("/api/v1/jobs", {"prompt": "x"}, format="json"), "/api/v1/jobs", "post",
           402)
    _check(d, api.patch(f"/api/v1/jobs/{job_id}", {"gpus": 1}, format="json"),
           "/api/v1/jobs/{job_id}", "patch", 409)  # cancelled above
    _check(d, api.get("/api/v1/credits"), "/api/v1/credits", "get", 200)
    _check(d, api.get("/api/v1/credits/transfers?limit=1"), "/api/v1/credits/transfers",
           "get", 200)
    _check(d, api.get("/api/v1/credits/usage"), "/api/v1/credits/usage", "get", 200)
    _check(d, api.get("/api/v1/keys"), "/api/v1/keys", "get", 200)
    make_member(alice, "mia")
    _check(d, api.get("/api/v1/members"), "/api/v1/members", "get", 200)
    _check(d, api.patch("/api/v1/members/mia", {"weight": 2}, format="json"),
           "/api/v1/members/{username}", "patch", 200)
    _check(d, api.delete("/api/v1/members/mia"), "/api/v1/members/{username}", "delete", 200)
    _check(d, api.get("/api/v1/credits/usage?month=2026-13"), "/api/v1/credits/usage", "get",
           400)


def test_a_placed_gangs_answers_are_what_the_document_says(document, api):
    for name in ("n1", "n2"):
        make_node(name, gpus=2, island="r1")
    job_id = api.post("/api/v1/jobs", {"prompt": "a crane", "gpus": 4}, format="json").json()[
        "id"]
    scheduler_tick_run()
    attempt = Attempt.objects.get(job_id=job_id)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    for rank in (0, 1):  # both nodes copied step 12 while it ran
        checkpoint_record(job_id=job_id, attempt_id=attempt.pk, rank=rank,
                          name=f"checkpoints/x-{rank}.tar", step=12, taken_at=timezone.now())
    for fraction in (0.2, 0.5):  # two reports: a pace, and an estimated end
        attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=fraction)
    detail = api.get(f"/api/v1/jobs/{job_id}")
    assert detail.json()["progress"]["estimated_end"]
    assert detail.json()["placement"] == [{"rank": 0, "node": "n1", "gpus": [0, 1]},
                                          {"rank": 1, "node": "n2", "gpus": [0, 1]}]
    assert detail.json()["checkpoint"]["nodes"] == 2
    _check(document, detail, "/api/v1/jobs/{job_id}", "get", 200)
    _check(document, api.get("/api/v1/jobs"), "/api/v1/jobs", "get", 200)


def test_an_answer_with_an_undocumented_key_is_caught(document):
    wrong = {"id": 1, "state": "QUEUED", "url": "/x", "backlog_s": None, "position": 3}
    assert conforms(wrong, {"$ref": "#/components/schemas/Accepted"}, document) == [
        "$: undocumented position"]


def test_a_refusal_for_now_is_documented_with_retry_after(document, tiers):
    Tier.objects.filter(name="free").update(max_queued_jobs_per_org=0)
    api = APIClient()
    key = api_key_issue(organization=organization_create(slug="dora", tier="free"), name="k")[1]
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    _check(document, api.post("/api/v1/jobs", {"prompt": "x"}, format="json"), "/api/v1/jobs",
           "post", 429)
