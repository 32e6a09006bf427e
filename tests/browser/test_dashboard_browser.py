"""The dashboard in a real browser (Chromium): log in, submit a job through the page's form
(a double click makes one job), watch a job run and end without reloading by hand, download
what it made, cancel a waiting job through the page's form (CSRF cookie and all), and see
nothing of another organization.

The job moves through the same services the node agent calls, so the page is what changes.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from jobs.models import Attempt, Job, Membership
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node
from workers.services.attempts import (
    AttemptResult,
    attempt_finish,
    attempt_heartbeat,
    attempt_start,
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (bin/services installs it)"),
]
VIDEO = b"YUV4MPEG2 W2 H2 F1:1 C420jpeg\nFRAME\n" + bytes(6)
WAIT_MS = 20_000  # the page reloads itself every 5 s


@pytest.fixture
def page(live_server, monkeypatch):
    # the test's own ORM calls run beside Playwright's event loop in this thread
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(base_url=live_server.url, accept_downloads=True)
        yield context.new_page()
        browser.close()
        # Playwright's loop gives the ORM calls made meanwhile a context, and a database
        # session, of their own: closed here, or the test database could not be dropped
        connections.close_all()


@pytest.fixture
def ann(alice):
    user = get_user_model().objects.create_user("ann", password="pw-ann-1")
    Membership.objects.create(user=user, organization=alice)
    return user


def _log_in(page, username: str, password: str) -> None:
    page.goto("/dashboard/")
    assert "/accounts/login/" in page.url  # asked who you are first
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/dashboard/$"))


def test_a_member_watches_a_job_run_and_downloads_what_it_made(page, ann, alice, bob,
                                                                tmp_path):
    from playwright.sync_api import expect

    make_node("n1", gpus=1)
    job, hidden = make_job(alice), make_job(bob)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.42)

    _log_in(page, "ann", "pw-ann-1")
    expect(page.locator("body")).to_contain_text("42% done")
    expect(page.locator("body")).not_to_contain_text(f"#{hidden.pk}")
    page.click(f"text=#{job.pk}")
    expect(page.locator("h1")).to_have_text(f"Job #{job.pk}: RUNNING")

    attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, progress=0.9)
    expect(page.locator("body")).to_contain_text("90% done", timeout=WAIT_MS)
    made = tmp_path / "out.y4m"
    made.write_bytes(VIDEO)
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult("SUCCEEDED", 0, output_path=made))
    expect(page.locator("h1")).to_have_text(f"Job #{job.pk}: SUCCEEDED", timeout=WAIT_MS)
    with page.expect_download() as download:
        page.click("text=output")
    assert Path(download.value.path()).read_bytes() == VIDEO
    assert page.locator("meta[http-equiv=refresh]").count() == 0  # nothing moves any more

    page.goto(f"/dashboard/jobs/{hidden.pk}")
    assert "/dashboard/jobs/" in page.url and page.locator("h1").inner_text() != (
        f"Job #{hidden.pk}: QUEUED")


def test_a_member_cancels_a_waiting_job_from_its_page(page, ann, alice, settings):
    from playwright.sync_api import expect

    settings.GPUSCHED_POSITIONS_SECONDS = 0  # this round draws the line of waiting jobs
    job = make_job(alice)
    scheduler_tick_run()  # no node: it waits, with a reason and its place in line
    job.refresh_from_db()
    _log_in(page, "ann", "pw-ann-1")
    page.goto(f"/dashboard/jobs/{job.pk}")
    expect(page.locator("body")).to_contain_text(job.pending_reason)
    expect(page.locator(".position")).to_have_text("1 of 1 in line")
    page.click("text=Cancel this job")
    expect(page.locator("h1")).to_have_text(f"Job #{job.pk}: CANCELLED")
    expect(page.locator("body")).to_contain_text("Cancelled.")
    job.refresh_from_db()
    assert job.state == "CANCELLED"


def test_a_member_submits_a_job_and_a_double_click_makes_one(page, ann, alice):
    from playwright.sync_api import expect

    _log_in(page, "ann", "pw-ann-1")
    page.click("text=New job")
    page.fill("textarea[name=prompt]", "a heron at dawn")
    page.fill("input[name=gpus]", "2")
    page.fill("textarea[name=labels]", "pipeline: birds")
    page.dblclick(".job-form button[type=submit]")
    expect(page.locator("h1")).to_have_text(re.compile(r"Job #\d+: QUEUED"))
    job = Job.objects.get()
    assert (job.prompt, job.gpus, job.labels, job.submitted_by) == (
        "a heron at dawn", 2, {"pipeline": "birds"}, ann)

    page.click("text=Send it again")  # the same request, a new form: a second job
    expect(page.locator("textarea[name=prompt]")).to_have_value("a heron at dawn")
    page.click(".job-form button[type=submit]")
    expect(page.locator("h1")).to_have_text(re.compile(rf"Job #(?!{job.pk}:)\d+: QUEUED"))
    assert Job.objects.count() == 2


def test_a_wrong_password_is_refused(page, ann):
    from playwright.sync_api import expect

    page.goto("/accounts/login/")
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", "not-her-password")
    page.click("button[type=submit]")
    # waits for the refused form to load: content() read mid-navigation is empty
    expect(page.locator("body")).to_contain_text("did not match")
    page.goto("/dashboard/")
    assert "/accounts/login/" in page.url
