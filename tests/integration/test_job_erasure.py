"""A client (or an operator) erases an ended job's content at once: its prompt, params,
output, logs and checkpoints go from the database and the storage, while its row, history
and credits stay. Attacked: a job not ended (the database refuses it too), an erasure
repeated and raced, a log published after it, a redrive and a replayed submission of the
erased job, and a bulk erase by label beside jobs not ended and another user's."""

from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from credits.services.holds import job_credits
from jobs.api.openapi import openapi_document
from jobs.models import (
    Attempt,
    Job,
    OrganizationEvent,
    StoredCheckpoint,
    WebhookDelivery,
    WebhookEndpoint,
)
from jobs.services.cancellation import job_cancel
from jobs.services.erasure import Erased, job_erase
from jobs.services.errors import Conflict
from jobs.services.redrive import job_redrive
from jobs.services.submission import JobSpec, job_submit
from jobs.services.tenancy import api_key_issue
from tests.support.factories import make_job, run_by_agent
from tests.support.openapi import conforms
from tests.support.race import race
from workers.agent.logs import LogPublisher
from workers.services.logs import log_name

pytestmark = pytest.mark.django_db(transaction=True)
QUICK = {"run_seconds": 1, "progress_interval": 0.1}


def _stored(job: Job) -> list[str]:
    """The job's files in storage: its output, its logs, its checkpoints' copies."""
    root = Path(default_storage.path(""))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and f"job-{job.pk}" in str(p))


def test_an_ended_job_is_erased_at_once_and_its_history_and_credits_stay(alice, agent, api):
    job = run_by_agent(alice, **QUICK)
    assert job.state == "SUCCEEDED" and job.output, job.error
    attempt = Attempt.objects.get(job=job)
    copy = default_storage.save(f"checkpoints/job-{job.pk}-a{attempt.pk}.tar",
                                ContentFile(b"weights"))
    StoredCheckpoint.objects.create(job=job, attempt=attempt, name=copy)
    assert any("stdout.log" in name for name in _stored(job)) and len(_stored(job)) >= 3
    credits, events = job_credits(job), job.events.count()

    answer = api.post(f"/api/v1/jobs/{job.pk}/erase")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["erased_at"] and body["state"] == "SUCCEEDED"
    assert (body["prompt"], body["params"], body["output_url"], body["error"]) == ("", {}, None, "")
    assert list(body["result"]) == ["erased_at"]
    assert body["credits"] == credits and body["labels"] == job.labels
    assert _stored(job) == []  # output, both logs and the checkpoint's copy
    assert not StoredCheckpoint.objects.filter(job=job).exists()
    assert job.events.count() == events
    for path in ("output", "log", f"attempts/{attempt.pk}/log"):
        gone = api.get(f"/api/v1/jobs/{job.pk}/{path}")
        assert (gone.status_code, gone.json()["error"]["code"]) == (410, "job_erased"), path
    tries = api.get(f"/api/v1/jobs/{job.pk}/attempts").json()["results"]
    assert (tries[0]["stderr_tail"], tries[0]["log_url"]) == ("", None)
    assert Job.objects.get(pk=job.pk).request_fingerprint == ""

    again = api.post(f"/api/v1/jobs/{job.pk}/erase")  # changes nothing
    assert again.status_code == 200 and again.json()["erased_at"] == body["erased_at"]
    audited = OrganizationEvent.objects.get(action="job.erased")
    assert audited.detail["job"] == job.pk and audited.api_key is not None


def test_a_job_not_ended_is_refused_and_the_database_refuses_it_too(alice, api):
    job = make_job(alice)
    answer = api.post(f"/api/v1/jobs/{job.pk}/erase")
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "job_not_finished")
    assert Job.objects.get(pk=job.pk).prompt == "a cat on a skateboard"
    with pytest.raises(IntegrityError), transaction.atomic():  # a code path that forgot
        Job.objects.filter(pk=job.pk).update(prompt="", erased_at=timezone.now())
    other = api.post(f"/api/v1/jobs/{job.pk + 1000}/erase")
    assert other.status_code == 404


def test_an_erased_job_is_neither_run_again_nor_replayed(alice, api):
    answer = api.post("/api/v1/jobs", {"prompt": "a fox", "max_retries": 0}, format="json",
                      HTTP_IDEMPOTENCY_KEY="render-17")
    job = Job.objects.get(pk=answer.json()["id"])
    Job.objects.filter(pk=job.pk).update(state="DEAD", finished_at=timezone.now())
    job_erase(job=job)
    with pytest.raises(Erased):  # its request is gone: nothing to run again
        job_redrive(job=job, by="op")
    replay = api.post("/api/v1/jobs", {"prompt": "a fox", "max_retries": 0}, format="json",
                      HTTP_IDEMPOTENCY_KEY="render-17")
    assert (replay.status_code, replay.json()["error"]["code"]) == (410, "job_erased")
    assert Job.objects.filter(organization=alice).count() == 1


def test_a_log_published_after_the_erasure_is_deleted_by_its_publisher(alice, agent,
                                                                       tmp_path):
    job = run_by_agent(alice, **QUICK)
    attempt = Attempt.objects.get(job=job)
    job_erase(job=job)
    late = tmp_path / "late.log"  # a gang's last rank, or a lost node back, publishing late
    late.write_text("PROGRESS 0.5 step=3 prompt was: a cat on a skateboard\n")
    LogPublisher(job_id=job.pk, attempt_id=attempt.pk, rank=1, files={"stdout": late}).publish()
    assert not default_storage.exists(log_name(job.pk, attempt.pk, 1, "stdout"))
    assert _stored(job) == []


def test_erasures_racing_erase_once_and_tell_the_webhooks_once(alice):
    WebhookEndpoint.objects.create(organization=alice, url="https://93.184.216.34/hook",
                                   events=["job.erased"])
    job = make_job(alice)
    job_cancel(job=job)
    errors = race(*[lambda: job_erase(job=Job.objects.get(pk=job.pk))] * 3)
    assert errors == []
    assert OrganizationEvent.objects.filter(action="job.erased").count() == 1
    assert Job.objects.get(pk=job.pk).prompt == ""
    delivery = WebhookDelivery.objects.get()  # a receiver's copies go too
    notice = {**delivery.payload, "delivery": delivery.pk}  # as it is sent
    assert (notice["event"], notice["job"]["id"], notice["job"]["output_url"]) == (
        "job.erased", job.pk, None)
    document = openapi_document()
    assert conforms(notice, document["webhooks"]["jobMoved"]["post"]["requestBody"][
        "content"]["application/json"]["schema"], document) == []


def test_a_users_jobs_are_erased_by_their_label(alice, api):
    def submit(user: str) -> Job:
        return job_submit(organization=alice, spec=JobSpec(prompt=f"for {user}",
                                                          labels={"user": user}))
    ended = [submit("u7"), submit("u7")]
    for job in ended:
        job_cancel(job=job)
    live, other = submit("u7"), submit("u8")
    job_cancel(job=other)
    read = APIClient()
    read.credentials(HTTP_AUTHORIZATION="Bearer " + api_key_issue(
        organization=alice, name="dashboards", scope="read")[1])
    refused = read.post("/api/v1/jobs/erase", {"label": ["user:u7"]}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "insufficient_scope")
    assert api.post("/api/v1/jobs/erase", {"label": []}, format="json").status_code == 400

    answer = api.post("/api/v1/jobs/erase", {"label": ["user:u7"]}, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"erased": [j.pk for j in ended], "left": 0, "not_ended": 1}
    prompts = dict(Job.objects.values_list("pk", "prompt"))
    assert [prompts[j.pk] for j in (*ended, live, other)] == ["", "", "for u7", "for u8"]
    with pytest.raises(Conflict):
        job_erase(job=live)


def test_an_operator_erases_ended_jobs_from_admin_and_not_live_ones(client, alice):
    from django.contrib.auth import get_user_model

    operator = get_user_model().objects.create_superuser("op", password="pw-op-1")
    client.force_login(operator)
    ended, live = make_job(alice), make_job(alice)
    job_cancel(job=ended)
    asked = client.post("/admin/jobs/job/", {"action": "erase", "_selected_action": [ended.pk]})
    assert asked.status_code == 200 and b"for good" in asked.content  # it asks first
    assert Job.objects.get(pk=ended.pk).erased_at is None
    page = client.post("/admin/jobs/job/", {
        "action": "erase", "apply": "Erase", "note": "request 881",
        "_selected_action": [ended.pk, live.pk]}, follow=True).content.decode()
    assert f"Erased: {ended.pk}." in page and "has not ended" in page
    assert Job.objects.get(pk=ended.pk).prompt == "" and Job.objects.get(pk=live.pk).prompt
    event = OrganizationEvent.objects.get(action="job.erased")
    assert (event.user, event.detail["note"]) == (operator, "request 881")
    assert client.get("/admin/jobs/job/?erased_at__isempty=0").status_code == 200
