"""A running job says how far it is, as its binary last told its heartbeat, and where the
pace of this try ends it: on the job, in the list and on the dashboard, never past its time
limit, paced from the try's own first report (so a try that resumed part-way, or took its
time to load, is not taken for a slow one), and not before its pace says anything."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.models import Attempt, Job
from tests.support.factories import make_member, make_node, start_placed
from workers.services.attempts import attempt_heartbeat

pytestmark = pytest.mark.django_db(transaction=True)


def _running(api, *, limit: int = 3600) -> tuple[int, Attempt]:
    make_node("n1", gpus=8)
    job_id = api.post("/api/v1/jobs", {"prompt": "x", "time_limit_s": limit},
                      format="json").json()["id"]
    return job_id, start_placed(Job.objects.get(pk=job_id))


def _reports(attempt: Attempt, first: float, latest: float, apart_s: float) -> None:
    """The try reported `first`, then `latest` `apart_s` seconds later (now)."""
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=first)
    Attempt.objects.filter(pk=attempt.pk).update(
        progress_first_at=timezone.now() - timedelta(seconds=apart_s))
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=latest)


def _progress(api, job_id: int) -> dict | None:
    return api.get(f"/api/v1/jobs/{job_id}").json()["progress"]


def _seconds_left(progress: dict) -> float:
    return (parse_datetime(progress["estimated_end"]) - timezone.now()).total_seconds()


def test_a_running_job_says_how_far_it_is_and_when_its_pace_ends_it(api, alice):
    job_id, attempt = _running(api)
    assert _progress(api, job_id) == {"fraction": 0.0, "estimated_end": None}
    _reports(attempt, 0.05, 0.30, apart_s=100)  # a quarter of the run in 100 s
    progress = _progress(api, job_id)
    assert progress["fraction"] == 0.3 and 270 < _seconds_left(progress) <= 280
    listed = api.get("/api/v1/jobs").json()["results"][0]
    assert listed["progress"] == progress


def test_a_try_that_resumed_part_way_is_paced_from_where_it_resumed(api, alice):
    job_id, attempt = _running(api)
    Job.objects.filter(pk=job_id).update(preemptions=1)
    _reports(attempt, 0.60, 0.70, apart_s=50)  # its checkpoint held 60%
    assert 145 < _seconds_left(_progress(api, job_id)) <= 150


def test_the_estimate_stays_inside_the_time_limit_and_says_nothing_it_cannot_know(api, alice):
    job_id, attempt = _running(api, limit=300)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.5)
    assert _progress(api, job_id)["estimated_end"] is None  # one report: no pace yet
    _reports(attempt, 0.50, 0.51, apart_s=10)
    assert _progress(api, job_id)["estimated_end"] is None  # too little seen done
    _reports(attempt, 0.51, 0.55, apart_s=100)  # 4% in 100 s: 1,125 s to go
    started = Attempt.objects.get(pk=attempt.pk).started_at
    assert parse_datetime(_progress(api, job_id)["estimated_end"]) == (
        started + timedelta(seconds=300))
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Attempt.objects.filter(pk=attempt.pk).update(  # reports stopped an hour ago, at that pace
        progress_at=an_hour_ago, progress_first_at=an_hour_ago - timedelta(seconds=100),
        started_at=timezone.now())
    assert _progress(api, job_id)["estimated_end"] is None


def test_the_dashboard_says_when_the_pace_ends_it(api, alice, client):
    job_id, attempt = _running(api, limit=300)
    _reports(attempt, 0.0, 0.1, apart_s=100)
    client.force_login(make_member(alice, "ann"))
    end = Attempt.objects.get(pk=attempt.pk).started_at + timedelta(seconds=300)  # its limit
    for page in (f"/dashboard/jobs/{job_id}", "/dashboard/"):
        shown = client.get(page).content.decode()
        assert f"10% done; at this pace it ends about {end:%H:%M:%S} UTC" in shown, page


def test_a_job_whose_binary_does_not_run_has_no_progress(api, alice):
    job_id = api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
    assert _progress(api, job_id) is None
