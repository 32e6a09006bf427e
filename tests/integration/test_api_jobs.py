"""The client API: accept fast, show only your own jobs, refuse bad input with a code."""

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import ApiKey, Job, JobEvent

pytestmark = pytest.mark.django_db


def test_submit_answers_202_with_the_job_id_and_queues_it(api):
    response = api.post("/api/v1/jobs", {"prompt": "a red fox", "gpus": 2}, format="json")
    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.state, job.gpus, job.organization.slug) == ("QUEUED", 2, "alice")
    assert JobEvent.objects.filter(job=job, to_state="QUEUED").count() == 1


def test_a_job_shows_its_state_and_why_it_waits(api):
    job_id = api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
    body = api.get(f"/api/v1/jobs/{job_id}").json()
    assert body["state"] == "QUEUED"
    assert body["pending"]["reason"]


def test_another_organizations_job_is_a_404(api, bob):
    job_id = api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    response = other.get(f"/api/v1/jobs/{job_id}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("body,field", [
    ({"gpus": 1}, "prompt"),
    ({"prompt": "x", "gpus": 0}, "gpus"),
    ({"prompt": "x", "gpus": 65}, "gpus"),
    ({"prompt": "x", "gpus": "many"}, "gpus"),
    ({"prompt": "x", "time_limit_s": -5}, "time_limit_s"),
    ({"prompt": "x", "params": [1, 2]}, "params"),
    ({"prompt": "x", "gpus": 4, "min_gpus": 0}, "min_gpus"),
    ({"prompt": "x", "urgency_s": -1}, "urgency_s"),
    ({"prompt": "x", "urgency_s": 86_401}, "urgency_s"),
])
def test_bad_input_is_a_400_with_a_code_and_nothing_is_queued(api, body, field):
    response = api.post("/api/v1/jobs", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and field in error["fields"]
    assert Job.objects.count() == 0


def test_min_gpus_above_gpus_is_a_400_with_its_own_code(api):
    response = api.post("/api/v1/jobs", {"prompt": "x", "gpus": 2, "min_gpus": 4}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "min_gpus_out_of_range"
    assert Job.objects.count() == 0


def test_malformed_json_is_a_400(api):
    response = api.post("/api/v1/jobs", "{nope", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_request"


def test_an_unknown_project_is_a_400(api):
    response = api.post("/api/v1/jobs", {"prompt": "x", "project": "ghost"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_project"


def test_no_key_and_a_revoked_key_are_401(alice):
    client = APIClient()
    assert client.get("/api/v1/jobs").status_code == 401
    ApiKey.objects.filter(organization=alice).update(revoked_at=timezone.now())
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.raw_key}")
    response = client.get("/api/v1/jobs")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_keys_are_stored_hashed(alice):
    key = ApiKey.objects.get(organization=alice)
    assert alice.raw_key not in (key.key_hash, key.prefix)
    assert alice.raw_key.startswith(key.prefix)


def test_the_home_page_shows_the_fleet(client):
    response = client.get("/")
    assert response.status_code == 200 and b"jobs waiting" in response.content


@pytest.mark.django_db(transaction=True)
def test_the_scheduler_says_why_a_job_waits(api):
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node

    make_node("small", gpus=2)
    job_id = api.post("/api/v1/jobs", {"prompt": "x", "gpus": 4}, format="json").json()["id"]
    scheduler_tick_run()
    pending = api.get(f"/api/v1/jobs/{job_id}").json()["pending"]
    assert pending["code"] and pending["code"] != "new"
    assert "4" in pending["reason"]


@pytest.mark.django_db(transaction=True)
def test_the_api_names_a_relaxation_that_would_start_the_job_now(api):
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node

    make_node("h", gpus=4)
    make_node("a", gpus=8, gpu_type="A100")
    spec = {"prompt": "x", "gpus": 4, "gpu_types": ["H100"]}
    first = api.post("/api/v1/jobs", spec, format="json").json()["id"]
    scheduler_tick_run()  # the first takes the only H100 node
    second = api.post("/api/v1/jobs", spec, format="json").json()["id"]
    scheduler_tick_run()
    assert api.get(f"/api/v1/jobs/{first}").json()["pending"] is None
    pending = api.get(f"/api/v1/jobs/{second}").json()["pending"]
    assert pending["code"] == "resources" and "A100" in pending["what_if"]
    assert "A100" not in pending["reason"]  # the words for people stay about what it waits for


def test_a_waiting_job_is_cancelled_at_once_and_twice_is_harmless(api):
    job_id = api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
    for _ in range(2):
        response = api.post(f"/api/v1/jobs/{job_id}/cancel")
        assert response.status_code == 202 and response.json()["state"] == "CANCELLED"
    assert Job.objects.get(pk=job_id).events.filter(to_state="CANCELLED").count() == 1


def test_a_finished_job_can_not_be_cancelled(api):
    job_id = api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
    api.post(f"/api/v1/jobs/{job_id}/cancel")
    Job.objects.filter(pk=job_id).update(state="SUCCEEDED")
    response = api.post(f"/api/v1/jobs/{job_id}/cancel")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "job_finished"


def test_another_organizations_job_can_not_be_cancelled(api, bob):
    job_id = api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    assert other.post(f"/api/v1/jobs/{job_id}/cancel").status_code == 404
    assert Job.objects.get(pk=job_id).state == "QUEUED"


@pytest.mark.django_db(transaction=True)
def test_a_scheduled_job_cancelled_before_its_node_starts_it_never_runs(api):
    from jobs.models import Attempt, GpuBinding
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node
    from workers.services.attempts import StaleAttempt, attempt_start

    make_node("n1", gpus=2)
    job_id = api.post("/api/v1/jobs", {"prompt": "x", "gpus": 2}, format="json").json()["id"]
    scheduler_tick_run()
    attempt = Attempt.objects.get(job_id=job_id)
    assert api.post(f"/api/v1/jobs/{job_id}/cancel").json()["state"] == "CANCELLED"
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    with pytest.raises(StaleAttempt):
        attempt_start(attempt_id=attempt.pk, token=attempt.token)


@pytest.mark.django_db(transaction=True)
def test_the_last_round_publishes_what_the_fleet_lacks(api, client):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node

    make_node("small", gpus=2)
    api.post("/api/v1/jobs", {"prompt": "x", "gpus": 2}, format="json")
    scheduler_tick_run()  # the first job takes the only node
    api.post("/api/v1/jobs", {"prompt": "y", "gpus": 2}, format="json")
    # the second has waited long past the paid tier's start target
    Job.objects.filter(state="QUEUED").update(enqueued_at=timezone.now() - timedelta(hours=1))
    scheduler_tick_run()
    body = client.get("/capacity").json()
    assert body["at"] and sum(body["short_gpus"].values()) >= 2


def test_the_list_pages_newest_first_and_filters_by_state(api, alice, bob):
    from jobs.services.cancellation import job_cancel
    from tests.support.factories import make_job

    ids = [make_job(alice).pk for _ in range(5)]
    make_job(bob)
    job_cancel(job=Job.objects.get(pk=ids[1]))
    first = api.get("/api/v1/jobs?limit=2").json()
    assert [j["id"] for j in first["results"]] == ids[:2:-1]
    second = api.get(first["next"]).json()
    assert [j["id"] for j in second["results"]] == ids[2:0:-1]
    last = api.get(second["next"]).json()
    assert [j["id"] for j in last["results"]] == [ids[0]] and last["next"] is None
    queued = api.get("/api/v1/jobs?state=QUEUED&limit=3").json()
    assert [j["id"] for j in queued["results"]] == [ids[4], ids[3], ids[2]]
    assert api.get(queued["next"]).json()["results"][0]["id"] == ids[0]  # the filter stays
    for bad in ("state=LATE", "limit=0", "limit=501", "before=x", "project=no%20such"):
        answer = api.get(f"/api/v1/jobs?{bad}")
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid", bad


def test_the_list_filters_by_project_and_keeps_it_on_the_next_page(api, alice, bob):
    from jobs.models import Project

    Project.objects.create(organization=alice, name="trailers")
    Project.objects.create(organization=bob, name="trailers")
    made = [api.post("/api/v1/jobs", {"prompt": "x", "project": name}, format="json").json()
            ["id"] for name in ("trailers", "default", "trailers", "trailers")]
    page = api.get("/api/v1/jobs?project=trailers&limit=2").json()
    assert [j["id"] for j in page["results"]] == [made[3], made[2]]
    assert [j["id"] for j in api.get(page["next"]).json()["results"]] == [made[0]]
    assert api.get("/api/v1/jobs?project=nothing").json()["results"] == []


def test_the_list_answers_the_jobs_named_and_none_of_another_organization(api, alice, bob):
    from tests.support.factories import make_job

    made = [api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
            for _ in range(3)]
    theirs = make_job(bob).pk
    query = "&".join(f"id={i}" for i in (made[0], made[2], theirs, 999_999))
    assert [j["id"] for j in api.get(f"/api/v1/jobs?{query}").json()["results"]] == [
        made[2], made[0]]
    page = api.get(f"/api/v1/jobs?id={made[0]}&id={made[1]}&limit=1").json()
    assert [j["id"] for j in api.get(page["next"]).json()["results"]] == [made[0]]
    for bad in ("id=x", "id=0", "&".join(f"id={i}" for i in range(1, 102))):
        refused = api.get(f"/api/v1/jobs?{bad}")
        assert refused.status_code == 400 and "id" in refused.json()["error"]["fields"], bad


@pytest.mark.django_db(transaction=True)
def test_a_job_that_accepts_fewer_gpus_is_told_how_many_would_start_it(api):
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node

    make_node("big", gpus=8)
    make_node("small", gpus=4)
    api.post("/api/v1/jobs", {"prompt": "x", "gpus": 8}, format="json")
    scheduler_tick_run()  # takes the only node of 8
    spec = {"prompt": "x", "gpus": 8, "min_gpus": 2}
    job_id = api.post("/api/v1/jobs", spec, format="json").json()["id"]
    scheduler_tick_run()
    body = api.get(f"/api/v1/jobs/{job_id}").json()
    assert (body["state"], body["gpus"], body["min_gpus"]) == ("QUEUED", 8, 2)
    assert "with 4 GPUs" in body["pending"]["what_if"]
    assert body["pending"]["relaxation"] == {"gpus": 4}


@pytest.mark.django_db(transaction=True)
def test_a_jobs_history_is_read_newest_first_a_page_at_a_time(api, bob):
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node

    make_node("n1", gpus=2)
    job_id = api.post("/api/v1/jobs", {"prompt": "x", "gpus": 4}, format="json").json()["id"]
    api.patch(f"/api/v1/jobs/{job_id}", {"gpus": 2}, format="json")
    scheduler_tick_run()
    first = api.get(f"/api/v1/jobs/{job_id}/events?limit=2").json()
    assert [(e["from_state"], e["to_state"]) for e in first["results"]] == [
        ("QUEUED", "SCHEDULED"), ("QUEUED", "QUEUED")]
    assert first["results"][1]["data"] == {"changed": {"gpus": [4, 2]}}
    assert first["results"][0]["attempt"] is not None
    rest = api.get(first["next"]).json()
    assert [(e["from_state"], e["to_state"], e["version"]) for e in rest["results"]] == [
        ("", "QUEUED", 0)]
    assert rest["next"] is None
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {bob.raw_key}")
    assert other.get(f"/api/v1/jobs/{job_id}/events").status_code == 404


def test_a_job_shows_where_it_holds_gpus_while_it_does(api):
    from jobs.models import Attempt
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node
    from workers.services.attempts import AttemptResult, attempt_finish, attempt_start

    for name in ("n1", "n2"):
        make_node(name, gpus=2, island="r1")
    gang = api.post("/api/v1/jobs", {"prompt": "x", "gpus": 4}, format="json").json()["id"]
    waiting = api.post("/api/v1/jobs", {"prompt": "y", "gpus": 4}, format="json").json()["id"]
    scheduler_tick_run()
    where = [{"rank": 0, "node": "n1", "gpus": [0, 1]}, {"rank": 1, "node": "n2", "gpus": [0, 1]}]
    assert api.get(f"/api/v1/jobs/{gang}").json()["placement"] == where
    listed = {j["id"]: j["placement"] for j in api.get("/api/v1/jobs").json()["results"]}
    assert listed == {gang: where, waiting: None}
    attempt = Attempt.objects.get(job_id=gang)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("FAILED", 1, "", None, "exit_1"))
    assert api.get(f"/api/v1/jobs/{gang}").json()["placement"] is None


def test_a_job_shows_what_a_retry_would_resume_from(api):
    from datetime import datetime, timedelta

    from jobs.models import Attempt
    from jobs.scheduler.tick import scheduler_tick_run
    from tests.support.factories import make_node
    from workers.services.attempts import (
        AttemptResult,
        attempt_finish,
        attempt_heartbeat,
        attempt_start,
    )
    from workers.services.checkpoints import Taken

    make_node("n1", gpus=2)
    job_id = api.post("/api/v1/jobs", {"prompt": "x", "gpus": 2}, format="json").json()["id"]
    scheduler_tick_run()
    assert api.get(f"/api/v1/jobs/{job_id}").json()["checkpoint"] is None  # none yet
    attempt = Attempt.objects.get(job_id=job_id)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    taken = timezone.now() - timedelta(seconds=5)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token,
                      copied=Taken("checkpoints/job-x.tar", taken, step=7))
    point = api.get(f"/api/v1/jobs/{job_id}").json()["checkpoint"]
    assert point == {"attempt": attempt.pk, "nodes": 1, "step": 7,
                     "taken_at": point["taken_at"]}
    assert datetime.fromisoformat(point["taken_at"].replace("Z", "+00:00")) == taken
    listed = {j["id"]: j["checkpoint"] for j in api.get("/api/v1/jobs").json()["results"]}
    assert listed == {job_id: point}
    api.post(f"/api/v1/jobs/{job_id}/cancel")
    assert api.get(f"/api/v1/jobs/{job_id}").json()["checkpoint"] == point  # still stopping
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("CANCELLED", -15))
    assert api.get(f"/api/v1/jobs/{job_id}").json()["checkpoint"] is None  # it ended
