"""The Python client against the service over real HTTP (pytest-django's live server): what
it answers, what it refuses, and what it does when an answer is lost on the way."""

from datetime import timedelta

import pytest
from django.utils import timezone

from gpusched_client import ApiError, Client, PartlySubmitted, Unreachable, WaitTimeout
from jobs.models import Attempt, Job, Tier
from jobs.services.cancellation import job_cancel
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import VIDEO, make_member, make_node, run_to_success, start_placed
from tests.support.faulty_proxy import FaultyProxy
from workers.services.attempts import AttemptResult, attempt_finish, attempt_heartbeat

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def proxy(live_server):
    proxy = FaultyProxy(live_server.url)
    yield proxy
    proxy.close()


@pytest.fixture
def waits():
    """The client's sleeps, recorded instead of slept."""
    return []


@pytest.fixture
def gs(proxy, alice, waits, clean_cache):
    return Client(proxy.url, alice.raw_key, sleep=waits.append, timeout=10)


def test_a_job_is_submitted_read_listed_and_cancelled(gs, proxy):
    made = [gs.submit("a fox", gpus=2, labels={"run": "7"}) for _ in range(3)]
    assert [m["state"] for m in made] == ["QUEUED"] * 3
    assert gs.job(made[0]["id"])["gpus"] == 2
    assert [j["id"] for j in gs.jobs(labels=["run:7"], limit=1)] == [
        m["id"] for m in reversed(made)]  # newest first, page after page
    assert gs.cancel(made[0]["id"])["state"] == "CANCELLED"
    assert gs.cancel(made[0]["id"])["state"] == "CANCELLED"  # a cancel is idempotent
    with pytest.raises(ApiError) as refused:  # a first try's refusal is the answer
        gs.release(made[1]["id"])
    assert (refused.value.status, refused.value.code) == (409, "job_not_held")
    assert len([s for s in proxy.seen if s[1].endswith("/release")]) == 1


def test_a_refusal_is_an_error_with_its_code_and_keeps_nothing(gs, proxy, live_server):
    with pytest.raises(ApiError) as refused:
        gs.submit("a fox", gpus=0)
    assert (refused.value.status, refused.value.code) == (400, "invalid")
    assert "gpus" in refused.value.body["fields"]
    with pytest.raises(ApiError) as refused:
        Client(proxy.url, "gs_not-a-key").job(1)
    assert refused.value.code == "authentication_failed"
    assert not Job.objects.exists() and len(proxy.seen) == 2  # a 4xx is not tried again


def test_a_submission_whose_answer_is_lost_makes_one_job(gs, proxy, alice):
    proxy.faults = ["drop"]
    job = gs.submit("a fox")
    assert Job.objects.get().pk == job["id"]  # the retry got the job the first try made
    first, again = (s[2]["Idempotency-Key"] for s in proxy.seen)
    assert first == again
    proxy.faults = ["drop"]  # with no retry, the job is made and the client never hears
    with pytest.raises(Unreachable):
        Client(proxy.url, alice.raw_key, retries=0).submit("a hare")
    assert Job.objects.count() == 2


def test_a_batch_whose_answer_is_lost_is_made_once(gs, proxy):
    proxy.faults = ["drop"]
    made = gs.submit_batch([{"prompt": "a fox"}, {"prompt": "its upscale", "after_batch": [0]}])
    assert sorted(j["id"] for j in made["jobs"]) == sorted(Job.objects.values_list("pk",
                                                                                   flat=True))
    assert [j["state"] for j in made["jobs"]] == ["QUEUED", "HELD"]


def test_acts_whose_answers_were_lost_answer_the_job_they_made(gs, proxy):
    job = gs.submit("a fox")
    proxy.faults = ["drop"]  # the cancel is done; its retry finds it done
    assert gs.cancel(job["id"])["state"] == "CANCELLED"
    proxy.faults = ["drop"]
    held = gs.submit("a hare")
    assert gs.hold(held["id"])["state"] == "HELD"  # answered on its first try, held once
    proxy.faults = ["drop"]  # released; the retry is refused as job_not_held
    assert gs.release(held["id"])["state"] == "QUEUED"
    url = f"/api/v1/jobs/{held['id']}"
    assert [s[1] for s in proxy.seen[-3:]] == [f"{url}/release", f"{url}/release", url]
    proxy.faults = ["busy"]  # refused on a retry after a try that did nothing: the answer
    with pytest.raises(ApiError) as refused:
        gs.release(held["id"])
    assert refused.value.code == "job_not_held" and not refused.value.after_lost_answer


def test_a_bulk_cancel_asks_until_none_is_left_and_a_lost_answer_cancels_once(
        gs, proxy, monkeypatch):
    from jobs.services import cancellation

    monkeypatch.setattr(cancellation, "CANCEL_BATCH", 2)
    made = [gs.submit("a fox", labels={"run": "7"})["id"] for _ in range(5)]
    kept = gs.submit("a hare", labels={"run": "8"})["id"]
    proxy.faults = ["drop"]  # the first batch is cancelled; its retry takes the next
    answer = gs.cancel_labelled(["run:7"])
    assert answer["left"] == 0 and set(answer["cancelled"]) == set(made[2:])
    assert set(Job.objects.filter(pk__in=made).values_list("state", flat=True)) == {
        "CANCELLED"}
    assert Job.objects.get(pk=kept).state == "QUEUED"
    assert len([s for s in proxy.seen if s[1] == "/api/v1/jobs/cancel"]) == 3
    with pytest.raises(ValueError):
        gs.cancel_labelled([])


def test_a_users_jobs_are_erased_by_label_and_a_lost_answer_erases_once(gs, proxy,
                                                                         monkeypatch):
    from jobs.models import OrganizationEvent
    from jobs.services import erasure

    monkeypatch.setattr(erasure, "ERASE_BATCH", 2)
    made = [gs.submit("a fox", labels={"user": "u1"})["id"] for _ in range(3)]
    live = gs.submit("a hare", labels={"user": "u1"})["id"]
    for pk in made:
        gs.cancel(pk)
    proxy.faults = ["drop"]  # the first batch is erased; its retry takes the next
    answer = gs.erase_labelled(["user:u1"])
    assert (answer["left"], answer["not_ended"], set(answer["erased"])) == (0, 1, {made[2]})
    assert set(Job.objects.filter(pk__in=made).values_list("prompt", flat=True)) == {""}
    assert OrganizationEvent.objects.filter(action="job.erased").count() == 3
    proxy.faults = ["drop"]
    assert gs.erase(made[0])["erased_at"]  # repeated after a lost answer: as it is
    with pytest.raises(ApiError) as refused:
        gs.erase(live)
    assert (refused.value.status, refused.value.code) == (409, "job_not_finished")


def test_busy_is_waited_out_and_a_wait_longer_than_allowed_is_the_answer(gs, proxy, alice,
                                                                         waits):
    proxy.faults = ["busy", "busy"]
    assert gs.submit("a fox")["state"] == "QUEUED"
    assert waits == [1.0, 1.0] and Job.objects.count() == 1
    Tier.objects.filter(name="paid").update(api_requests_per_min=2)  # the submission, and:
    gs.job(Job.objects.get().pk)
    impatient = Client(proxy.url, alice.raw_key, max_retry_wait_s=0.5, sleep=waits.append)
    with pytest.raises(ApiError) as refused:
        impatient.job(Job.objects.get().pk)
    assert (refused.value.status, refused.value.code) == (429, "rate_limited")
    assert 0 < refused.value.retry_after <= 60 and waits == [1.0, 1.0]


def test_wait_gives_the_job_once_it_ends_or_says_it_has_not(gs, alice):
    job = gs.submit("a fox")
    with pytest.raises(WaitTimeout) as late:
        Client(gs.transport.base_url, alice.raw_key).wait(job["id"], timeout=0.3, poll_s=0.1)
    assert late.value.job["state"] == "QUEUED"
    gs.cancel(job["id"])
    assert gs.wait(job["id"])["state"] == "CANCELLED"


def test_many_jobs_go_in_batches_and_a_refusal_names_its_job_among_all(gs):
    jobs = [{"prompt": f"frame {i}"} for i in range(130)]
    made = gs.submit_many(jobs, idempotency_key="frames")
    assert [j["id"] for j in made] == sorted(Job.objects.values_list("pk", flat=True))
    assert gs.submit_many(jobs, idempotency_key="frames") == made  # nothing made twice
    jobs[110]["gpus"] = 65
    with pytest.raises(PartlySubmitted) as refused:
        gs.submit_many(jobs, idempotency_key="frames-2")
    assert refused.value.index == 110 and len(refused.value.made) == 100
    assert Job.objects.count() == 230  # the first batch of the second call, not the second
    jobs[110]["gpus"], jobs[125]["after"] = 1, [999_999]  # refused by the service, not the form
    with pytest.raises(PartlySubmitted) as refused:
        gs.submit_many(jobs, idempotency_key="frames-3")
    assert (refused.value.code, refused.value.index) == ("unknown_dependency", 125)


def test_a_project_made_and_a_member_taken_out_whose_answers_are_lost_happen_once(
        gs, proxy, alice):
    proxy.faults = ["drop"]  # made; its retry is refused as project_exists
    made = gs.make_project("render", running_gpu_cap=4)
    assert made["name"] == "render" and made["running_gpu_cap"] == 4
    assert alice.projects.filter(name="render").count() == 1
    assert gs.set_project("render", running_gpu_cap=None)["running_gpu_cap"] is None
    with pytest.raises(ApiError) as refused:  # a first try's refusal is the answer
        gs.make_project("render")
    assert refused.value.code == "project_exists"
    make_member(alice, "mia")
    assert gs.set_member("mia", weight=2, monthly_limit=50)["monthly_limit"] == 50
    assert [m["username"] for m in gs.members()] == ["mia"]
    assert [(k["name"], k["live"]) for k in gs.api_keys()] == [("ci", True)]
    proxy.faults = ["drop"]
    assert gs.remove_member("mia") == {"username": "mia", "keys_revoked": None}
    assert gs.members() == []
    with pytest.raises(ApiError) as refused:
        gs.remove_member("mia")
    assert refused.value.code == "not_found"


def test_a_wait_on_many_jobs_asks_once_a_poll_for_all_of_them(proxy, alice):
    ids = [job_submit(organization=alice, spec=JobSpec(prompt=f"shot {i}")).pk
           for i in range(150)]
    for pk in ids[:-1]:
        job_cancel(job=Job.objects.get(pk=pk))

    def last_one_ends(_seconds: float) -> None:
        job_cancel(job=Job.objects.get(pk=ids[-1]))
    gs = Client(proxy.url, alice.raw_key, sleep=last_one_ends, timeout=10)
    done = gs.wait_all(ids)
    assert [j["id"] for j in done] == ids and {j["state"] for j in done} == {"CANCELLED"}
    polls = [path for _, path, _ in proxy.seen]
    assert len(polls) == 3 and polls[-1].count("id=") == 1  # 100 + 50, then the one left
    waiting = job_submit(organization=alice, spec=JobSpec(prompt="late")).pk
    with pytest.raises(WaitTimeout) as late:
        gs.wait_all([ids[0], waiting], timeout=0)
    assert [j["id"] for j in late.value.waiting] == [waiting]
    with pytest.raises(ApiError) as unknown:
        gs.wait_all([ids[0], 999_999])
    assert unknown.value.code == "not_found"


def test_a_download_cut_off_halfway_resumes_where_it_stopped(gs, proxy, alice, tmp_path):
    make_node("n1", gpus=1)
    job = run_to_success(job_submit(organization=alice, spec=JobSpec(prompt="a fox")),
                         tmp_path)
    proxy.faults = ["cut"]
    saved = gs.output(job.pk, tmp_path / "fox.y4m")
    assert saved.read_bytes() == VIDEO
    first, again = (headers for _, _, headers in proxy.seen)
    assert "Range" not in first
    assert again["Range"] == f"bytes={len(VIDEO) // 2}-" and again["If-Range"].startswith('"')


def test_a_wait_polls_again_soon_after_the_end_the_service_estimates(proxy, alice):
    make_node("n1", gpus=1)
    job = job_submit(organization=alice, spec=JobSpec(prompt="a fox"))
    attempt = start_placed(job)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.05)
    Attempt.objects.filter(pk=attempt.pk).update(
        progress_first_at=timezone.now() - timedelta(seconds=95))
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.95)  # 5 s to go
    pauses = []

    def pause(seconds: float) -> None:  # its binary ends while the client sleeps
        pauses.append(seconds)
        attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                       result=AttemptResult("SUCCEEDED", 0))
    gs = Client(proxy.url, alice.raw_key, sleep=pause, timeout=10)
    assert gs.wait(job.pk, poll_s=30, timeout=60)["state"] == "SUCCEEDED"
    assert len(pauses) == 1 and 5 <= pauses[0] <= 7  # not the 30 s it would have slept
