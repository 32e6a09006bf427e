"""A client names its jobs with labels and finds them again by them; labels that break the
rules are refused with nothing accepted, and they travel with the job (webhooks, a rerun)."""

import json

import pytest

from jobs.models import Job
from jobs.services.redrive import job_redrive
from jobs.services.webhooks import _payload

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(api, labels, **extra):
    # as a client's JSON: escapes that Python strings cannot encode (a lone surrogate) pass
    return api.post("/api/v1/jobs", json.dumps({"prompt": "a fox", "labels": labels}),
                    content_type="application/json", **extra)


def _found(api, *wanted) -> list[int]:
    answer = api.get("/api/v1/jobs", {"label": list(wanted)})
    assert answer.status_code == 200, answer.json()
    return [job["id"] for job in answer.json()["results"]]


def test_jobs_are_found_by_their_labels(api):
    fox = _submit(api, {"request": "r-1", "step": "render"}).json()["id"]
    owl = _submit(api, {"request": "r-2", "step": "render"}).json()["id"]
    plain = api.post("/api/v1/jobs", {"prompt": "a hare"}, format="json").json()["id"]
    assert api.get(f"/api/v1/jobs/{fox}").json()["labels"] == {"request": "r-1",
                                                              "step": "render"}
    assert api.get(f"/api/v1/jobs/{plain}").json()["labels"] == {}
    assert _found(api, "request:r-1") == [fox]
    assert _found(api, "step:render") == [owl, fox]
    assert _found(api, "step:render", "request:r-2") == [owl]  # each of them
    assert _found(api, "step") == [owl, fox]  # any value
    assert _found(api, "step:upscale") == []
    assert len(_found(api)) == 3


def test_every_label_asked_for_carries_to_the_next_page(api):
    first = _submit(api, {"step": "render", "shot": "12"}).json()["id"]
    _submit(api, {"step": "upscale", "shot": "12"})  # between them, of one label only
    wanted = [first, _submit(api, {"step": "render", "shot": "12"}).json()["id"]]
    page = api.get("/api/v1/jobs", {"label": ["step:render", "shot:12"], "limit": 1}).json()
    assert [job["id"] for job in page["results"]] == [wanted[1]]
    following = api.get(page["next"]).json()
    assert [job["id"] for job in following["results"]] == [wanted[0]]
    assert following["next"] is None


def test_a_key_is_data_and_a_value_may_hold_colons(api):
    odd = _submit(api, {"a__b": "x:y", "in": ""}).json()["id"]
    _submit(api, {"a": "x:y"})
    assert _found(api, "a__b:x:y") == [odd]  # "__" is no path of lookups
    assert _found(api, "in:") == [odd]


def test_another_organizations_labels_find_nothing(api, bob):
    from rest_framework.test import APIClient

    from jobs.services.tenancy import api_key_issue

    _submit(api, {"request": "r-1"})
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_issue(organization=bob, name='k')[1]}")
    assert other.get("/api/v1/jobs", {"label": "request:r-1"}).json()["results"] == []


@pytest.mark.parametrize("labels", [
    {f"k{n}": "v" for n in range(17)},  # too many
    {"": "v"}, {"-lead": "v"}, {"with space": "v"}, {"k" * 64: "v"},  # keys
    {"k": "v" * 257}, {"k": 3}, {"k": None}, {"k": "\ud800"}, {"k": "nul\x00"},  # values
    ["not", "an", "object"], "text",
], ids=lambda labels: repr(labels)[:24])
def test_labels_that_break_the_rules_are_refused_and_nothing_is_accepted(api, labels):
    answer = _submit(api, labels)
    assert answer.status_code == 400, answer.json()
    assert "labels" in answer.json()["error"].get("fields", {})
    assert not Job.objects.exists()


@pytest.mark.parametrize("query", ["bad key:v", ":v", "k" * 64, "x" * 400])
def test_a_bad_label_question_is_a_400(api, query):
    answer = api.get("/api/v1/jobs", {"label": query})
    assert answer.status_code == 400
    assert "label" in answer.json()["error"]["fields"]


def test_a_repeated_request_with_other_labels_is_another_request(api):
    first = _submit(api, {"request": "r-1"}, HTTP_IDEMPOTENCY_KEY="k1")
    again = _submit(api, {"request": "r-1"}, HTTP_IDEMPOTENCY_KEY="k1")
    assert again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    other = _submit(api, {"request": "r-2"}, HTTP_IDEMPOTENCY_KEY="k1")
    assert (other.status_code, other.json()["error"]["code"]) == (409, "idempotency_key_reused")


def test_labels_travel_with_the_job(api):
    job = Job.objects.get(pk=_submit(api, {"request": "r-1"}).json()["id"])
    assert _payload(job, "job.succeeded")["job"]["labels"] == {"request": "r-1"}
    Job.objects.filter(pk=job.pk).update(state="FAILED")
    job.refresh_from_db()
    assert job_redrive(job=job, by="operator").labels == {"request": "r-1"}


def test_a_batch_is_cancelled_by_its_label_and_nothing_else(api, alice, bob):
    from jobs.models import Attempt
    from jobs.services.submission import JobSpec, job_submit
    from tests.support.factories import make_node, start_placed
    from tests.support.ledger import assert_ledger_consistent

    make_node("n1", gpus=1)
    batch = [_submit(api, {"batch": "b1", "n": str(n)}).json()["id"] for n in range(4)]
    running = start_placed(Job.objects.get(pk=batch[0]))  # the oldest holds the one GPU
    other_batch = _submit(api, {"batch": "b2"}).json()["id"]
    done = Job.objects.get(pk=batch[3])
    Job.objects.filter(pk=done.pk).update(state="SUCCEEDED")
    bobs = job_submit(organization=bob, spec=JobSpec(prompt="x", labels={"batch": "b1"}))
    answer = api.post("/api/v1/jobs/cancel", {"label": ["batch:b1"]}, format="json")
    assert answer.status_code == 202, answer.json()
    assert answer.json() == {"cancelled": batch[1:3], "stopping": [batch[0]], "left": 0}
    states = dict(Job.objects.values_list("pk", "state"))
    assert [states[pk] for pk in batch] == ["RUNNING", "CANCELLED", "CANCELLED", "SUCCEEDED"]
    assert states[other_batch] == "QUEUED" and states[bobs.pk] == "QUEUED"
    assert Attempt.objects.get(pk=running.pk).stop_requested == "cancel"
    assert_ledger_consistent()
    again = api.post("/api/v1/jobs/cancel", {"label": ["batch:b1"]}, format="json").json()
    assert again == {"cancelled": [], "stopping": [batch[0]], "left": 0}  # once each


def test_a_bulk_cancel_goes_a_batch_at_a_time_and_says_how_many_are_left(api, monkeypatch):
    from jobs.services import cancellation

    monkeypatch.setattr(cancellation, "CANCEL_BATCH", 2)
    jobs = [_submit(api, {"batch": "b1"}).json()["id"] for _ in range(5)]
    first = api.post("/api/v1/jobs/cancel", {"label": ["batch"]}, format="json").json()
    assert first == {"cancelled": jobs[:2], "stopping": [], "left": 3}
    api.post("/api/v1/jobs/cancel", {"label": ["batch"]}, format="json")
    last = api.post("/api/v1/jobs/cancel", {"label": ["batch"]}, format="json").json()
    assert last == {"cancelled": jobs[4:], "stopping": [], "left": 0}


def test_jobs_still_stopping_never_keep_a_bulk_cancel_from_the_rest(api, monkeypatch):
    from jobs.services import cancellation
    from tests.support.factories import make_node, start_placed

    monkeypatch.setattr(cancellation, "CANCEL_BATCH", 2)
    make_node(gpus=2)
    running = [_submit(api, {"batch": "b1"}).json()["id"] for _ in range(2)]
    for job in Job.objects.filter(pk__in=running):
        start_placed(job)
    waiting = [_submit(api, {"batch": "b1"}).json()["id"] for _ in range(2)]
    first = api.post("/api/v1/jobs/cancel", {"label": ["batch"]}, format="json").json()
    assert first == {"cancelled": [], "stopping": running, "left": 2}
    second = api.post("/api/v1/jobs/cancel", {"label": ["batch"]}, format="json").json()
    assert second == {"cancelled": waiting, "stopping": [], "left": 0}
    third = api.post("/api/v1/jobs/cancel", {"label": ["batch"]}, format="json").json()
    assert third == {"cancelled": [], "stopping": running, "left": 0}  # told again, once


@pytest.mark.parametrize("body", [{}, {"label": []}, {"label": ["bad key"]}, {"label": "b"},
                                  {"label": [":v"]}])
def test_a_bulk_cancel_names_its_labels_or_cancels_nothing(api, body):
    job = _submit(api, {"batch": "b1"}).json()["id"]
    answer = api.post("/api/v1/jobs/cancel", body, format="json")
    assert answer.status_code == 400 and "label" in answer.json()["error"]["fields"]
    assert Job.objects.get(pk=job).state == "QUEUED"
