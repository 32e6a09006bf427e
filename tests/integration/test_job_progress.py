"""A running job says how far it is, as its binary last told its heartbeat, and where the
pace of its run so far ends it: on the job, in the list, never past its time limit, and not
for a try that resumed part-way."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.models import Attempt, Job
from tests.support.factories import make_member, make_node, start_placed
from workers.services.attempts import attempt_heartbeat

pytestmark = pytest.mark.django_db(transaction=True)


def _running(api, *, limit: int = 3600, ran_s: float = 100) -> tuple[int, Attempt]:
    make_node("n1", gpus=8)
    job_id = api.post("/api/v1/jobs", {"prompt": "x", "time_limit_s": limit},
                      format="json").json()["id"]
    attempt = start_placed(Job.objects.get(pk=job_id))
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=timezone.now() - timedelta(seconds=ran_s))
    return job_id, attempt


def _progress(api, job_id: int) -> dict | None:
    return api.get(f"/api/v1/jobs/{job_id}").json()["progress"]


def test_a_running_job_says_how_far_it_is_and_when_its_pace_ends_it(api, alice):
    job_id, attempt = _running(api)
    assert _progress(api, job_id) == {"fraction": 0.0, "estimated_end": None}
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.25)
    progress = _progress(api, job_id)
    started = Attempt.objects.get(pk=attempt.pk).started_at
    end = parse_datetime(progress["estimated_end"])
    assert progress["fraction"] == 0.25
    assert abs((end - started).total_seconds() - 400) < 5  # 100 s for a quarter
    listed = api.get("/api/v1/jobs").json()["results"][0]
    assert listed["progress"]["fraction"] == 0.25


def test_the_dashboard_says_when_the_pace_ends_it(api, alice, client):
    job_id, attempt = _running(api, limit=300, ran_s=100)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.1)
    client.force_login(make_member(alice, "ann"))
    end = Attempt.objects.get(pk=attempt.pk).started_at + timedelta(seconds=300)  # its limit
    for page in (f"/dashboard/jobs/{job_id}", "/dashboard/"):
        shown = client.get(page).content.decode()
        assert f"10% done; at this pace it ends about {end:%H:%M:%S} UTC" in shown, page


def test_the_estimate_stays_inside_the_time_limit_and_says_nothing_it_cannot_know(api, alice):
    job_id, attempt = _running(api, limit=300, ran_s=100)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.1)
    progress = _progress(api, job_id)
    started = Attempt.objects.get(pk=attempt.pk).started_at
    assert parse_datetime(progress["estimated_end"]) == started + timedelta(seconds=300)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.04)
    assert _progress(api, job_id)["estimated_end"] is None  # too early to tell
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.5)
    Job.objects.filter(pk=job_id).update(preemptions=1)  # this try resumed part-way
    assert _progress(api, job_id) == {"fraction": 0.5, "estimated_end": None}


def test_a_job_whose_binary_does_not_run_has_no_progress(api, alice):
    job_id = api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
    assert _progress(api, job_id) is None
