"""A member submits a job on the dashboard as the API would take it, or sends an earlier one
again: the same checks, admission and credit hold, one job per form however often it is sent,
a refusal shown with what was typed and nothing queued or held, and nobody submitting for an
organization they do not belong to."""

import html
import re

import pytest
from django.test import Client

from credits.models import GpuPrice, Hold
from credits.services.grants import credits_grant
from jobs.models import Job, Project, Tier
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_member, make_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(client, alice):
    Project.objects.create(organization=alice, name="trailers")
    client.force_login(make_member(alice, "mia"))
    return client


def _token(page) -> str:
    return re.search(r'name="token" value="([^"]+)"', page.content.decode()).group(1)


def _errors(page) -> str:
    """The refusals the page lists, as text."""
    listed = re.search(r'<ul class="errors">(.*?)</ul>', page.content.decode(), re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", listed.group(1))) if listed else ""


def _form(member, **fields) -> dict:
    return {"token": _token(member.get("/dashboard/jobs/new")), "target": "alice/trailers",
            "prompt": "a heron at dawn", "gpus": "2", "preemptible": "on", **fields}


def test_the_form_offers_the_users_projects_and_the_fleets_gpu_types(member, bob):
    make_node("n1", gpu_type="H100"), make_node("n2", gpu_type="A100")
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    page = member.get("/dashboard/jobs/new").content.decode()
    assert "alice/trailers" in page and "bob/" not in page
    assert "A100, H100" in page and "A100, H100 at 3600 credits a GPU-hour" in page


def test_a_member_submits_a_job_that_queues_with_the_member_as_submitter(member, alice):
    answer = member.post("/dashboard/jobs/new", _form(
        member, gpu_types="H100, A100", time_limit_s="900", checkpointable="on",
        params='{"seconds": 8}', labels="pipeline: trailers\nshot: 12", start_within_s="120"))
    job = Job.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/dashboard/jobs/{job.pk}"
    assert (job.organization, job.project.name, job.submitted_by.username) == (
        alice, "trailers", "mia")
    assert (job.state, job.gpus, job.gpu_types, job.time_limit_s) == (
        "QUEUED", 2, ["H100", "A100"], 900)
    assert (job.checkpointable, job.preemptible, job.params, job.labels) == (
        True, True, {"seconds": 8}, {"pipeline": "trailers", "shot": "12"})
    assert job.events.get().reason == "submitted on the dashboard by mia"
    assert (job.start_by - job.created_at).total_seconds() == pytest.approx(120, abs=1)
    assert f"Submitted as job #{job.pk}" in member.get(answer["Location"]).content.decode()


def test_an_unchecked_box_is_a_no(member):
    form = _form(member)
    del form["preemptible"]
    member.post("/dashboard/jobs/new", form)
    assert (Job.objects.get().preemptible, Job.objects.get().checkpointable) == (False, False)


def test_a_form_sent_twice_makes_one_job(member):
    form = _form(member)
    first = member.post("/dashboard/jobs/new", form)
    again = member.post("/dashboard/jobs/new", form)  # a double click, a reload
    assert first["Location"] == again["Location"] and Job.objects.count() == 1
    assert "sent already" in member.get(again["Location"]).content.decode()


def test_a_form_sent_again_changed_makes_nothing_and_offers_a_new_one(member):
    form = _form(member)
    member.post("/dashboard/jobs/new", form)
    answer = member.post("/dashboard/jobs/new", {**form, "prompt": "a crane"})
    assert answer.status_code == 409 and Job.objects.count() == 1
    page = answer.content.decode()
    assert "sent before with other values" in _errors(answer) and "a crane" in page
    assert _token(answer) != form["token"]
    assert member.post("/dashboard/jobs/new", {**form, "prompt": "a crane",
                                               "token": _token(answer)}).status_code == 302
    assert Job.objects.count() == 2


@pytest.mark.parametrize("fields, words", [
    ({"gpus": "0"}, "GPUs: "),
    ({"gpus": "9999"}, "at most"),
    ({"gpus": "two"}, "GPUs: "),
    ({"prompt": ""}, "Prompt: "),
    ({"time_limit_s": "-5"}, "Time limit: "),
    ({"params": "{not json"}, "not JSON"),
    ({"params": "[1, 2]"}, "JSON object"),
    ({"labels": "no colon here"}, "is not key: value"),
    ({"labels": "bad key!: x"}, "Labels: "),
    ({"min_gpus": "3"}, "Accepts as few as: "),
    ({"start_within_s": "0"}, "Give up unless started within: "),
    ({"target": "alice/nope"}, "no project"),
    ({"target": "garbage"}, "choose one"),
    ({"token": "short"}, "out of date"),
    ({"token": ""}, "out of date"),
])
def test_bad_input_is_a_400_that_keeps_what_was_typed_and_queues_nothing(member, fields,
                                                                          words):
    answer = member.post("/dashboard/jobs/new", _form(member, **{
        "prompt": "a heron, typed", **fields}))
    assert answer.status_code == 400 and words in _errors(answer)
    assert Job.objects.count() == 0 and Hold.objects.count() == 0
    if "prompt" not in fields:
        assert "a heron, typed" in answer.content.decode()


def test_a_job_it_cannot_pay_for_is_a_402_and_nothing_is_held(member, alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=500)
    answer = member.post("/dashboard/jobs/new", _form(member, gpus="1", time_limit_s="600"))
    assert answer.status_code == 402 and "600 credits" in _errors(answer)
    assert Job.objects.count() == 0 and Hold.objects.count() == 0
    assert member.post("/dashboard/jobs/new", _form(
        member, gpus="1", time_limit_s="300")).status_code == 302
    assert Hold.objects.get().amount == 300


def test_checking_a_form_says_its_price_keeps_it_and_sends_nothing(member, alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=5_000)
    form = _form(member, gpus="2", time_limit_s="600", prompt="a heron, checked")
    answer = member.post("/dashboard/jobs/new", {**form, "check": "1"})
    text = " ".join(answer.content.decode().split())
    assert answer.status_code == 200 and Job.objects.count() == Hold.objects.count() == 0
    assert "it would be queued, holding 1200 credits (3800 left available then)" in text
    assert "a heron, checked" in text  # the form as typed, ready to send
    assert member.post("/dashboard/jobs/new", _form(
        member, gpus="2", time_limit_s="600")).status_code == 302
    refused = member.post("/dashboard/jobs/new", {**_form(member, gpus="8",
                                                          time_limit_s="600"), "check": "1"})
    assert refused.status_code == 402 and Job.objects.count() == 1


def test_admission_refusals_show_as_the_api_gives_them(member, alice):
    Tier.objects.filter(name="paid").update(max_queued_jobs_per_org=1)
    assert member.post("/dashboard/jobs/new", _form(member)).status_code == 302
    answer = member.post("/dashboard/jobs/new", _form(member))
    assert answer.status_code == 429 and Job.objects.count() == 1
    assert "1 jobs of this organization are waiting" in _errors(answer), _errors(answer)


def test_nobody_submits_for_another_organization(member, bob):
    Project.objects.create(organization=bob, name="ads")
    answer = member.post("/dashboard/jobs/new", _form(member, target="bob/ads"))
    assert answer.status_code == 400 and Job.objects.count() == 0
    assert "choose one of your organizations' projects" in _errors(answer)
    outsider = Client()
    assert outsider.post("/dashboard/jobs/new", {"prompt": "x"}).status_code == 302  # login
    assert Job.objects.count() == 0


def test_the_form_checks_its_csrf_token(alice):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(make_member(alice, "tess"))
    form = {"token": _token(browser.get("/dashboard/jobs/new")), "target": "alice/default",
            "prompt": "a heron"}
    assert browser.post("/dashboard/jobs/new", form).status_code == 403
    assert Job.objects.count() == 0


def test_a_job_is_sent_again_with_its_request_filled_in(member, alice, bob):
    earlier = job_submit(organization=alice, spec=JobSpec(
        prompt="a fox in snow", gpus=4, min_gpus=2, gpu_types=("H100",), time_limit_s=1200,
        params={"seconds": 6}, labels={"shot": "3"}, project="trailers", max_retries=0,
        preemptible=False, start_within_s=600))
    page = member.get(f"/dashboard/jobs/new?from={earlier.pk}").content.decode()
    for shown in ("a fox in snow", 'value="4"', 'value="2"', 'value="H100"', 'value="1200"',
                  "shot: 3", "&quot;seconds&quot;: 6", 'name="max_retries" type="number" '
                  'min="0" value="0"', "<option selected>alice/trailers</option>",
                  'name="start_within_s" type="number" min="1" value="600"'):
        assert shown in page, shown
    assert 'name="preemptible" checked' not in page
    theirs = job_submit(organization=bob, spec=JobSpec(prompt="bob's"))
    assert member.get(f"/dashboard/jobs/new?from={theirs.pk}").status_code == 404
    for odd in ("x", "\u00b2", "9" * 4301):  # none names a job, whatever isdigit() says
        assert member.get("/dashboard/jobs/new", {"from": odd}).status_code == 404
    shown = member.get(f"/dashboard/jobs/{earlier.pk}").content.decode()
    assert "Send it again" in shown and "Cancelled unless started by" in shown
