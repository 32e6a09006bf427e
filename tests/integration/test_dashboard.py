"""The users' dashboard shows the jobs of their organizations, why each waits and how far
each runs, and nothing of other organizations."""

import html
import re

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.models import Attempt, Job, Membership
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node, run_placed_job, start_placed
from workers.services.attempts import attempt_heartbeat, attempt_start
from workers.services.checkpoints import checkpoint_record

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(client, alice):
    user = get_user_model().objects.create_user("ann", password="pw-ann-1")
    Membership.objects.create(user=user, organization=alice)
    client.force_login(user)
    return client


def _link(job) -> str:
    return f'href="/dashboard/jobs/{job.pk}"'


def test_the_dashboard_asks_who_you_are(client):
    response = client.get("/dashboard/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert client.get("/accounts/login/").status_code == 200


def test_a_member_sees_why_jobs_wait_and_how_far_they_run(member, alice, bob):
    make_node("n1", gpus=1)
    running = make_job(alice)
    waiting = make_job(alice)
    hidden = make_job(bob)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=running)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.42)
    waiting.refresh_from_db()
    page = member.get("/dashboard/").content.decode()
    # by link: a bare "#66" also matches the page's colour #666
    assert _link(running) in page and "42% done" in page
    assert _link(waiting) in page and waiting.pending_reason in page
    assert _link(hidden) not in page
    detail = member.get(f"/dashboard/jobs/{running.pk}").content.decode()
    assert "RUNNING" in detail and "n1" in detail


def test_a_member_sees_when_a_failed_job_tries_again(member, alice):
    from workers.services.attempts import AttemptResult, attempt_finish

    make_node("n1", gpus=1)
    job = make_job(alice)
    attempt = start_placed(job)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("FAILED", 1, "boom", None, "exit_1"))
    job.refresh_from_db()
    page = member.get("/dashboard/").content.decode()
    assert f"retry 1 queues at {timezone.localtime(job.retry_at):%H:%M:%S} UTC" in page


def test_the_list_reads_a_fixed_number_of_queries(member, alice,
                                                  django_assert_max_num_queries):
    for _ in range(20):
        make_job(alice)
    # session, user, jobs, their live attempts, the user's organizations and their projects,
    # one's credits, those suspended
    with django_assert_max_num_queries(8):
        assert member.get("/dashboard/").status_code == 200


def test_a_gangs_page_shows_every_node_it_runs_on_and_what_it_resumes_from(member, alice):
    from workers.services.logs import log_kept, log_name, log_store

    for name in ("n1", "n2"):
        make_node(name, gpus=2, island="r1")
    job = make_job(alice, gpus=4)
    scheduler_tick_run()
    detail = member.get(f"/dashboard/jobs/{job.pk}").content.decode()
    assert "n1<br>n2" in detail and "0, 1<br>0, 1" in detail
    assert "A retry resumes" not in detail  # nothing copied yet
    attempt = Attempt.objects.get(job=job)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    for rank in (0, 1):  # both nodes copied step 12 while it ran
        checkpoint_record(job_id=job.pk, attempt_id=attempt.pk, rank=rank,
                          name=f"checkpoints/x-{rank}.tar", step=12, taken_at=timezone.now())
    detail = member.get(f"/dashboard/jobs/{job.pk}").content.decode()
    assert f"checkpoint of attempt\n{attempt.pk} at step 12," in detail
    assert "(all 2 nodes)" in detail
    # what each node printed
    log_store(log_name(job.pk, attempt.pk, 1, "stderr"), b"rank one speaks\n")
    log_kept(attempt.pk)
    detail = member.get(f"/dashboard/jobs/{job.pk}").content.decode()
    url = f"/dashboard/jobs/{job.pk}/attempts/{attempt.pk}/log"
    assert f'href="{url}?rank=1&amp;stream=stderr"' in detail
    assert member.get(url, {"rank": 1, "stream": "stderr"}).content == b"rank one speaks\n"
    assert member.get(url, {"rank": 2}).status_code == 404


def test_another_organizations_job_is_a_404(member, bob):
    assert member.get(f"/dashboard/jobs/{make_job(bob).pk}").status_code == 404


def test_a_member_cancels_a_waiting_job_and_not_another_organizations(member, alice, bob):
    mine, theirs = make_job(alice), make_job(bob)
    assert "Cancel this job" in member.get(f"/dashboard/jobs/{mine.pk}").content.decode()
    page = member.post(f"/dashboard/jobs/{mine.pk}/cancel", follow=True).content.decode()
    assert "Cancelled." in page and "cancelled by ann" in page
    mine.refresh_from_db()
    assert mine.state == "CANCELLED"
    assert "Cancel this job" not in page
    assert member.post(f"/dashboard/jobs/{theirs.pk}/cancel").status_code == 404
    assert member.get(f"/dashboard/jobs/{mine.pk}/cancel").status_code == 405
    theirs.refresh_from_db()
    assert theirs.state == "QUEUED"


def test_a_member_erases_an_ended_job_once_ticked_and_not_another_organizations(member,
                                                                              alice, bob):
    mine, theirs = make_job(alice), make_job(bob)
    assert "Erase this job" not in member.get(f"/dashboard/jobs/{mine.pk}").content.decode()
    member.post(f"/dashboard/jobs/{mine.pk}/cancel")
    assert "Erase this job" in member.get(f"/dashboard/jobs/{mine.pk}").content.decode()
    unticked = member.post(f"/dashboard/jobs/{mine.pk}/erase", follow=True).content.decode()
    assert "Nothing was erased" in unticked and "a cat on a skateboard" in unticked
    page = member.post(f"/dashboard/jobs/{mine.pk}/erase", {"sure": "1"},
                       follow=True).content.decode()
    assert "Erased:" in page and "a cat on a skateboard" not in page
    assert "Erase this job" not in page and "Send it again" not in page
    assert Job.objects.get(pk=mine.pk).erased_at is not None
    assert member.get(f"/dashboard/jobs/new?from={mine.pk}").status_code == 404
    assert "a cat" not in member.get("/dashboard/").content.decode()
    theirs.state = "CANCELLED"
    theirs.save()
    assert member.post(f"/dashboard/jobs/{theirs.pk}/erase", {"sure": "1"}).status_code == 404
    assert Job.objects.get(pk=theirs.pk).prompt == "a cat on a skateboard"


def test_a_running_job_cancelled_says_its_node_is_stopping_it_and_asks_no_more(member,
                                                                               alice):
    make_node(gpus=1)
    job = make_job(alice)
    start_placed(job)
    page = member.post(f"/dashboard/jobs/{job.pk}/cancel", follow=True).content.decode()
    assert "Its node is stopping it to cancel it; the binary is killed at" in page
    assert "cancelled by ann; stopping on its node" in page  # its history says who asked
    assert "Cancel this job" not in page and Job.objects.get(pk=job.pk).state == "RUNNING"


def test_a_member_sees_the_credits_and_what_a_job_holds(member, alice):
    from credits.models import GpuPrice
    from credits.services.grants import credits_grant

    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=10_000)
    job = make_job(alice)  # the default time limit, at the price of an H100
    page = member.get("/dashboard/").content.decode()
    held = job.time_limit_s
    assert f"alice: {10_000 - held} credits available,\n{held} held" in page
    detail = member.get(f"/dashboard/jobs/{job.pk}").content.decode()
    assert f"Credits: 0 spent, {held} held" in detail
    assert f"<td>HOLD</td><td>{held}</td>" in detail  # its statement


def test_the_credits_page_shows_buckets_budgets_and_transfers(member, alice, bob):
    from credits.models import Budget, GpuPrice
    from credits.services.grants import credits_grant

    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=10_000, memo="invoice 17")
    credits_grant(organization=bob, amount=99, memo="bob-private")
    Budget.objects.create(organization=alice, monthly_limit=50_000)
    job = make_job(alice)
    page = member.get("/dashboard/credits").content.decode()
    assert f"alice: {10_000 - job.time_limit_s} available, {job.time_limit_s} held" in page
    assert "invoice 17" in page and f'href="/dashboard/jobs/{job.pk}"' in page
    assert "organization alice" in page and "50000" in page
    assert "bob-private" not in page and "bob:" not in page


def test_the_credits_page_shows_this_months_usage_by_project(member, alice):
    from credits.models import GpuPrice
    from credits.services.grants import credits_grant

    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=10_000)
    make_node("n1", gpus=1)
    run_placed_job(make_job(alice), ran_for_s=360)
    page = member.get("/dashboard/credits").content.decode()
    assert "<h3>Used in" in page and "<td>default</td>" in page
    assert "<td>0.10</td>" in page  # six minutes of one GPU


@pytest.mark.django_db(transaction=True)
def test_a_member_takes_the_relaxation_a_waiting_job_is_offered(member, alice):
    from jobs.services.submission import JobSpec, job_submit

    make_node("h", gpus=4)
    make_node("a", gpus=8, gpu_type="A100")
    spec = JobSpec(prompt="a heron", gpus=4, gpu_types=("H100",))
    job_submit(organization=alice, spec=spec)
    scheduler_tick_run()  # the first takes the only H100 node
    job = job_submit(organization=alice, spec=spec)
    assert "Also accept" not in member.get(f"/dashboard/jobs/{job.pk}").content.decode()
    scheduler_tick_run()
    page = member.get(f"/dashboard/jobs/{job.pk}").content.decode()
    assert "Also accept A100, keeping its place" in page
    page = member.post(f"/dashboard/jobs/{job.pk}/relax", follow=True).content.decode()
    assert "keeps its place" in page
    job.refresh_from_db()
    assert job.gpu_types == ["H100", "A100"] and job.pending_what_if == ""
    again = member.post(f"/dashboard/jobs/{job.pk}/relax", follow=True).content.decode()
    assert "No change is offered" in again


def test_a_jobs_page_links_the_jobs_it_runs_after(member, alice):
    from jobs.services.submission import JobSpec, job_submit

    first = make_job(alice)
    then = job_submit(organization=alice, spec=JobSpec(prompt="x", after=(first.pk,)))
    page = member.get(f"/dashboard/jobs/{then.pk}").content.decode()
    assert f'Runs after <a href="/dashboard/jobs/{first.pk}">#{first.pk}</a> (QUEUED)' in page
    assert f"waiting for job {first.pk} to succeed" in page


def test_a_member_finds_jobs_by_their_label(member, alice, bob):
    from jobs.services.submission import JobSpec, job_submit

    fox = job_submit(organization=alice, spec=JobSpec(prompt="a fox", labels={"batch": "b 1"}))
    owl = job_submit(organization=alice, spec=JobSpec(prompt="an owl", labels={"batch": "b2"}))
    job_submit(organization=bob, spec=JobSpec(prompt="a hare", labels={"batch": "b 1"}))
    page = member.get("/dashboard/").content.decode()
    assert 'href="?label=batch:b%201"' in page and "<code>batch: b 1</code>" in page
    found = member.get("/dashboard/", {"label": "batch:b 1"}).content.decode()
    assert _link(fox) in found and _link(owl) not in found and "a hare" not in found
    none = member.get("/dashboard/", {"label": "batch:b3"}).content.decode()
    assert "No job has the label" in none
    refused = member.get("/dashboard/", {"label": "bad key"}, follow=True).content.decode()
    assert "not key or key:value" in refused and _link(fox) not in refused


def test_a_label_value_no_job_can_hold_is_refused_not_looked_up(member, alice):
    from jobs.services.submission import JobSpec, job_submit

    fox = job_submit(organization=alice, spec=JobSpec(prompt="a fox", labels={"k": "v"}))
    found = member.get("/dashboard/", {"label": "k:\x00"})
    assert found.status_code == 200 and "U+0000" in found.content.decode()
    assert _link(fox) not in found.content.decode()
    for action in ("cancel", "hold", "erase"):
        answer = member.post(f"/dashboard/jobs/{action}", {"label": "k:v\x00", "sure": "1"},
                             follow=True)
        assert answer.status_code == 200 and "U+0000" in answer.content.decode(), action
    assert Job.objects.get(pk=fox.pk).state == "QUEUED"


def test_digits_int_refuses_are_no_cursor_and_no_rank(member, alice):
    job = make_job(alice)
    for odd in ("\u00b2", "\u2460", "9" * 4301):  # isdigit() says yes, int() says no
        answer = member.get("/dashboard/", {"before": odd})
        assert answer.status_code == 200 and _link(job) in answer.content.decode()
        url = f"/dashboard/jobs/{job.pk}/attempts/1/log"
        assert member.get(url, {"rank": odd}).status_code == 404


def test_a_member_pages_back_through_every_job_and_finds_them_by_state(member, alice, bob,
                                                                      monkeypatch):
    from jobs.services.cancellation import job_cancel
    from jobs.web import views

    monkeypatch.setattr(views, "RECENT", 3)
    jobs = [make_job(alice) for _ in range(7)]
    make_job(bob)
    for job in jobs[::3]:
        job_cancel(job=job)
    seen, path, pages = [], "/dashboard/", 0
    while path:
        page = member.get(path).content.decode()
        seen += sorted((job for job in jobs if _link(job) in page),
                       key=lambda job, page=page: page.index(_link(job)))
        older = re.search(r'class="older" href="([^"]+)"', page)
        path = "/dashboard/" + html.unescape(older.group(1)) if older else ""
        pages += 1
    # each once, newest first
    assert [job.pk for job in seen] == [job.pk for job in reversed(jobs)] and pages == 3
    cancelled = member.get("/dashboard/", {"state": "CANCELLED"}).content.decode()
    assert {job.pk for job in jobs if _link(job) in cancelled} == {
        jobs[6].pk, jobs[3].pk, jobs[0].pk}
    assert "Older jobs" not in cancelled
    assert "No job is SUCCEEDED" in member.get("/dashboard/", {"state": "SUCCEEDED"}
                                               ).content.decode()
    # what is not a state, one of the member's projects or a cursor is no filter
    for odd in ({"state": "NOPE"}, {"before": "x"}, {"before": "99999999999999999999"},
                {"project": "bob/default"}, {"project": "alice"}):
        answer = member.get("/dashboard/", odd)
        assert answer.status_code == 200 and _link(jobs[6]) in answer.content.decode()


def test_a_member_finds_a_projects_jobs_a_page_at_a_time(member, alice, monkeypatch):
    from jobs.models import Project
    from jobs.services.submission import JobSpec, job_submit
    from jobs.web import views

    monkeypatch.setattr(views, "RECENT", 2)
    Project.objects.create(organization=alice, name="trailers")
    made = [job_submit(organization=alice, spec=JobSpec(prompt="x", project=name))
            for name in ("trailers", "default", "trailers", "trailers")]
    page = member.get("/dashboard/", {"project": "alice/trailers"}).content.decode()
    assert [j.pk for j in made if _link(j) in page] == [made[2].pk, made[3].pk]
    older = html.unescape(re.search(r'class="older" href="([^"]+)"', page).group(1))
    following = member.get("/dashboard/" + older).content.decode()
    assert [j.pk for j in made if _link(j) in following] == [made[0].pk]
    assert "alice/trailers" in older.replace("%2F", "/")


def test_a_member_cancels_every_job_with_a_label_and_no_other(member, alice, bob):
    from jobs.services.submission import JobSpec, job_submit

    def labelled(org, batch: str):
        return job_submit(organization=org, spec=JobSpec(prompt="x", labels={"batch": batch}))

    make_node("n1", gpus=1)
    running = labelled(alice, "b1")
    start_placed(running)
    waiting = [labelled(alice, "b1") for _ in range(2)]
    other, theirs = labelled(alice, "b2"), labelled(bob, "b1")
    answer = member.post("/dashboard/jobs/cancel", {"label": "batch:b1"}, follow=True)
    assert "2 cancelled, 1 stopping on their nodes." in answer.content.decode()
    assert answer.redirect_chain[-1][0] == "/dashboard/?label=batch%3Ab1"
    states = {job.pk: state for job, state in ((j, Job.objects.get(pk=j.pk).state)
                                                for j in (*waiting, other, theirs))}
    assert [states[j.pk] for j in waiting] == ["CANCELLED", "CANCELLED"]
    assert (states[other.pk], states[theirs.pk]) == ("QUEUED", "QUEUED")
    assert Attempt.objects.get(job=running).stop_requested == "cancel"
    refused = member.post("/dashboard/jobs/cancel", {"label": ""}, follow=True)
    assert "never takes every job" in refused.content.decode()
    assert Job.objects.filter(state="QUEUED").count() == 2
    assert member.get("/dashboard/jobs/cancel").status_code == 405


def test_a_member_erases_every_ended_job_with_a_label_once_ticked(member, alice, bob):
    from jobs.services.cancellation import job_cancel
    from jobs.services.submission import JobSpec, job_submit

    def labelled(org, user: str):
        return job_submit(organization=org, spec=JobSpec(prompt="x", labels={"user": user}))

    ended = [labelled(alice, "u7") for _ in range(2)]
    for job in ended:
        job_cancel(job=job)
    live, other, theirs = labelled(alice, "u7"), labelled(alice, "u8"), labelled(bob, "u7")
    job_cancel(job=other)
    job_cancel(job=theirs)
    page = member.get("/dashboard/?label=user:u7").content.decode()
    assert "Erase every ended job with this label" in page
    unticked = member.post("/dashboard/jobs/erase", {"label": "user:u7"}, follow=True)
    assert "Nothing was erased" in unticked.content.decode()
    assert Job.objects.filter(erased_at__isnull=False).count() == 0
    answer = member.post("/dashboard/jobs/erase", {"label": "user:u7", "sure": "1"},
                         follow=True)
    assert "2 erased, 1 not ended yet left as they are." in answer.content.decode()
    assert answer.redirect_chain[-1][0] == "/dashboard/?label=user%3Au7"
    erased = set(Job.objects.filter(erased_at__isnull=False).values_list("pk", flat=True))
    assert erased == {j.pk for j in ended}  # not the live one, another user's, bob's
    assert Job.objects.get(pk=live.pk).prompt == "x" and other.pk not in erased


def test_a_member_holds_and_releases_every_waiting_job_with_a_label(member, alice, bob):
    from jobs.services.submission import JobSpec, job_submit

    def labelled(org, batch: str):
        return job_submit(organization=org, spec=JobSpec(prompt="x", labels={"batch": batch}))

    mine, other, theirs = labelled(alice, "b1"), labelled(alice, "b2"), labelled(bob, "b1")
    page = member.get("/dashboard/?label=batch:b1").content.decode()
    assert "Hold every job with this label" in page
    held = member.post("/dashboard/jobs/hold", {"label": "batch:b1"}, follow=True)
    assert "1 held." in held.content.decode()
    states = [Job.objects.get(pk=j.pk).state for j in (mine, other, theirs)]
    assert states == ["HELD", "QUEUED", "QUEUED"]
    released = member.post("/dashboard/jobs/hold", {"label": "batch:b1", "release": "1"},
                           follow=True)
    assert "1 released." in released.content.decode()
    assert Job.objects.get(pk=mine.pk).state == "QUEUED"
