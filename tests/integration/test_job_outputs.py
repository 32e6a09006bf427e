"""A job's output goes to its own organization only: its API keys and its members. Storage
paths are not served, since they name the job and could be guessed."""

import pytest
from rest_framework.test import APIClient

from tests.support.factories import VIDEO, make_job, make_member, make_node, run_to_success

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def done(alice, tmp_path):
    make_node("n1", gpus=1)
    return run_to_success(make_job(alice), tmp_path)


def _key_of(org) -> APIClient:
    from jobs.services.tenancy import api_key_issue

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_issue(organization=org, name='k')[1]}")
    return client


def test_the_organization_downloads_its_output_through_the_api(done, api):
    url = api.get(f"/api/v1/jobs/{done.pk}").json()["output_url"]
    assert url == f"/api/v1/jobs/{done.pk}/output"
    answer = api.get(url)
    assert answer.status_code == 200 and b"".join(answer.streaming_content) == VIDEO
    assert answer["Content-Disposition"] == 'attachment; filename="out.y4m"'


def test_nobody_else_gets_it(done, bob):
    assert _key_of(bob).get(f"/api/v1/jobs/{done.pk}/output").status_code == 404
    assert APIClient().get(f"/api/v1/jobs/{done.pk}/output").status_code == 401


def test_a_job_without_output_is_a_404(api, alice):
    job = make_job(alice)
    assert api.get(f"/api/v1/jobs/{job.pk}/output").json()["error"]["code"] == "not_found"


def test_members_download_from_the_dashboard_and_others_do_not(done, alice, bob, client):
    ann, ben = make_member(alice, "ann"), make_member(bob, "ben")
    client.force_login(ann)
    page = client.get(f"/dashboard/jobs/{done.pk}").content.decode()
    assert f'href="/dashboard/jobs/{done.pk}/output"' in page
    assert b"".join(client.get(f"/dashboard/jobs/{done.pk}/output").streaming_content) == VIDEO
    client.force_login(ben)
    assert client.get(f"/dashboard/jobs/{done.pk}/output").status_code == 404


def test_an_output_past_its_retention_is_deleted_and_the_api_says_so(done, api, settings,
                                                                      alice):
    from datetime import timedelta

    from django.core.files.storage import default_storage

    from jobs.models import Job
    from jobs.services.outputs import expire_outputs

    settings.GPUSCHED_OUTPUT_RETENTION_DAYS = 30
    name = done.output.name
    ended = done.finished_at
    assert expire_outputs(now=ended + timedelta(days=29)) == 0
    settings.GPUSCHED_OUTPUT_RETENTION_DAYS = 0  # kept for ever
    assert expire_outputs(now=ended + timedelta(days=365)) == 0
    settings.GPUSCHED_OUTPUT_RETENTION_DAYS = 30
    now = ended + timedelta(days=31)
    assert expire_outputs(now=now) == 1
    assert not default_storage.exists(name)
    job = Job.objects.get(pk=done.pk)
    assert (job.state, job.output.name) == ("SUCCEEDED", "")
    assert job.result["output_expired_at"] == now.isoformat()
    body = api.get(f"/api/v1/jobs/{done.pk}").json()
    assert body["output_url"] is None and body["result"]["output_expired_at"]
    answer = api.get(f"/api/v1/jobs/{done.pk}/output")
    assert (answer.status_code, answer.json()["error"]["code"]) == (410, "output_expired")
    assert expire_outputs(now=now + timedelta(days=1)) == 0  # once


@pytest.mark.parametrize("asked, status, part", [
    ("bytes=0-9", 206, slice(0, 10)),
    ("bytes=10-", 206, slice(10, None)),
    ("bytes=-5", 206, slice(-5, None)),
    ("bytes=3-999999999", 206, slice(3, None)),  # past the end: up to it
    ("bytes=0-1,5-9", 200, slice(None)),  # several: the whole
    ("bytes=9-3", 200, slice(None)),  # unreadable: the whole
    ("lines=0-9", 200, slice(None)),
    ("bytes=" + "9" * 4301 + "-", 200, slice(None)),  # unreadable, past what int() reads
])
def test_a_range_of_the_output_is_served_alone(done, api, asked, status, part):
    answer = api.get(f"/api/v1/jobs/{done.pk}/output", HTTP_RANGE=asked)
    assert answer.status_code == status
    assert b"".join(answer.streaming_content) == VIDEO[part]
    assert answer["Accept-Ranges"] == "bytes" and answer["ETag"]
    if status == 206:
        served = range(len(VIDEO))[part]
        assert answer["Content-Range"] == f"bytes {served[0]}-{served[-1]}/{len(VIDEO)}"
        assert answer["Content-Disposition"] == 'attachment; filename="out.y4m"'


def test_a_resumed_download_gets_the_rest_only_of_the_same_output(done, api, client, alice):
    whole = api.get(f"/api/v1/jobs/{done.pk}/output")
    etag = whole["ETag"]
    rest = api.get(f"/api/v1/jobs/{done.pk}/output", HTTP_RANGE="bytes=7-", HTTP_IF_RANGE=etag)
    assert rest.status_code == 206 and b"".join(rest.streaming_content) == VIDEO[7:]
    changed = api.get(f"/api/v1/jobs/{done.pk}/output", HTTP_RANGE="bytes=7-",
                      HTTP_IF_RANGE='"another"')
    assert changed.status_code == 200 and b"".join(changed.streaming_content) == VIDEO
    past = api.get(f"/api/v1/jobs/{done.pk}/output", HTTP_RANGE=f"bytes={len(VIDEO)}-")
    assert past.status_code == 416 and past["Content-Range"] == f"bytes */{len(VIDEO)}"
    assert past.json()["error"]["code"] == "range_not_satisfiable"
    client.force_login(make_member(alice, "ann"))  # the dashboard resumes too
    part = client.get(f"/dashboard/jobs/{done.pk}/output", HTTP_RANGE="bytes=-4")
    assert part.status_code == 206 and b"".join(part.streaming_content) == VIDEO[-4:]


def test_the_output_is_closed_when_its_answer_cannot_be_made(done, monkeypatch):
    from jobs.models import Job
    from jobs.services.outputs import output_response

    def fails(header, size):
        raise RuntimeError("a fault while the answer is made")

    monkeypatch.setattr("jobs.services.outputs.byte_range", fails)
    job = Job.objects.get(pk=done.pk)
    with pytest.raises(RuntimeError):
        output_response(job, {"Range": "bytes=0-"})
    assert job.output.closed


def test_storage_that_does_not_answer_is_a_503_to_ask_again_and_a_lost_file_a_410(
        alice, api, client, settings, tmp_path):
    from django.core.files.storage import default_storage

    from tests.support.storage import AwayStorage

    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "tests.support.storage.AwayStorage"}}
    AwayStorage.fails = AwayStorage.reads = 0
    make_node("n1", gpus=1)
    done = run_to_success(make_job(alice), tmp_path)
    url = f"/api/v1/jobs/{done.pk}/output"
    AwayStorage.fails = 1
    answer = api.get(url)
    assert (answer.status_code, answer["Retry-After"]) == (503, "30")
    assert answer.json()["error"]["code"] == "storage_unavailable"
    assert b"".join(api.get(url).streaming_content) == VIDEO  # asked again, once it answers
    AwayStorage.fails = 1
    client.force_login(make_member(alice, "ann"))
    page = client.get(f"/dashboard/jobs/{done.pk}/output")
    assert (page.status_code, page["Retry-After"]) == (503, "30")
    default_storage.delete(done.output.name)  # lost, as storage can lose it
    answer = api.get(url, HTTP_RANGE="bytes=10-")
    assert (answer.status_code, answer.json()["error"]["code"]) == (410, "output_missing")
