"""What a job's binary prints reaches its organization, while it runs and whole at its end,
bounded in size, to nobody else, and goes after its retention; keeping it never fails a job."""

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_member, make_node, run_by_agent
from tests.support.processes import wait_for
from workers.agent.logs import BoundedCopy, last_lines
from workers.agent.runner import run_attempt
from workers.services.logs import expire_logs, log_name
from workers.services.reaper import reap_expired_attempts, release_due_retries

pytestmark = pytest.mark.django_db(transaction=True)
QUICK = {"run_seconds": 1, "progress_interval": 0.1}


def _running(org, run_seconds: float) -> tuple[Job, Attempt, threading.Thread]:
    """A job placed on a node and run by its agent in a thread of its own, started."""
    make_node("n1", gpus=1)
    job = make_job(org, run_seconds=run_seconds, progress_interval=0.1)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)

    def run() -> None:
        try:
            run_attempt(attempt.pk, attempt.token)
        finally:
            connection.close()  # the thread's own
    runner = threading.Thread(target=run)
    runner.start()
    return job, attempt, runner


def test_the_organization_reads_what_its_binary_printed(alice, agent, api):
    job = run_by_agent(alice, **QUICK)
    assert job.state == "SUCCEEDED", job.error
    answer = api.get(f"/api/v1/jobs/{job.pk}/log")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/plain")
    attempt = Attempt.objects.get(job=job)
    assert (answer["X-Attempt-Id"], answer["X-Log-Final"]) == (str(attempt.pk), "true")
    lines = answer.content.decode().splitlines()
    assert lines[0].startswith("START CUDA_VISIBLE_DEVICES=")
    # whole: published before the end is reported
    assert "PROGRESS 1.0000 step=" in lines[-2] and lines[-1].startswith("OUTPUT ")
    tail = api.get(f"/api/v1/jobs/{job.pk}/log", {"tail": 10}).content
    assert tail == answer.content[-10:]
    listed = api.get(f"/api/v1/jobs/{job.pk}/attempts").json()["results"][0]
    assert listed["log_url"] == f"/api/v1/jobs/{job.pk}/attempts/{attempt.pk}/log"
    assert api.get(listed["log_url"]).content == answer.content


def test_each_try_keeps_its_own_log_and_stderr_says_why_it_crashed(alice, agent, api):
    job = run_by_agent(alice, **QUICK, fail="crash", fail_at=0.5)
    assert job.state == "RETRY_WAIT"
    crashed = Attempt.objects.get(job=job)
    stderr = api.get(f"/api/v1/jobs/{job.pk}/log", {"stream": "stderr"}).content.decode()
    assert "SimulatedCrash" in stderr and "Traceback" in stderr
    release_due_retries(now=Job.objects.get(pk=job.pk).retry_at)
    scheduler_tick_run()
    retry = Attempt.objects.filter(job=job).exclude(pk=crashed.pk).get()
    run_attempt(retry.pk, retry.token)
    assert api.get(f"/api/v1/jobs/{job.pk}/log")["X-Attempt-Id"] == str(retry.pk)
    first = api.get(f"/api/v1/jobs/{job.pk}/attempts/{crashed.pk}/log", {"stream": "stderr"})
    assert first.content.decode() == stderr  # the latest is the default, the first stays


def test_a_running_job_is_followed_as_it_prints(alice, agent, api):
    job, attempt, runner = _running(alice, run_seconds=4)
    try:
        seen = []

        def printed_while_running() -> bool:
            answer = api.get(f"/api/v1/jobs/{job.pk}/log")
            seen.append((answer["X-Log-Final"], answer.content.count(b"PROGRESS")))
            return seen[-1][0] == "false" and seen[-1][1] >= 2
        wait_for(printed_while_running, 10, "progress published while it runs", every=0.1)
    finally:
        runner.join(timeout=30)
    final = api.get(f"/api/v1/jobs/{job.pk}/log")
    assert final["X-Log-Final"] == "true"
    assert final.content.count(b"PROGRESS") > seen[-1][1]  # more came, and all of it


def test_a_fenced_off_try_keeps_what_it_printed_to_its_end(alice, agent, api, settings):
    settings.GPUSCHED_LOG_PUBLISH_S = 600  # no copy on the way: what is kept is the end's
    job, attempt, runner = _running(alice, run_seconds=30)
    try:
        wait_for(lambda: Attempt.objects.get(pk=attempt.pk).progress > 0, 10, "progress")
        # its node seems lost: the try is reaped and the job waits to run again
        # (by a clock past any lease a heartbeat may renew meanwhile: on a busy machine one
        # did, and the try ran on to its end)
        Attempt.objects.filter(pk=attempt.pk).update(lease_expires_at=timezone.now())
        lease = timedelta(seconds=settings.GPUSCHED_LEASE_SECONDS)
        assert reap_expired_attempts(now=timezone.now() + lease + timedelta(minutes=1)) == 1
    finally:
        runner.join(timeout=30)
    assert not runner.is_alive()
    answer = api.get(f"/api/v1/jobs/{job.pk}/attempts/{attempt.pk}/log")
    assert answer.status_code == 200 and answer["X-Log-Final"] == "true"
    assert answer.content.count(b"PROGRESS") >= 1
    assert Job.objects.get(pk=job.pk).state == "RETRY_WAIT"  # and its end was not taken


def test_a_log_keeps_its_last_bytes_from_a_whole_line(alice, agent, api, settings):
    settings.GPUSCHED_LOG_MAX_BYTES = 1024
    job = run_by_agent(alice, run_seconds=1, progress_interval=0.002)  # about 500 lines
    text = api.get(f"/api/v1/jobs/{job.pk}/log").content
    assert len(text) <= 1024 + 100
    assert text.startswith(b"[gpusched: earlier lines dropped; a log keeps its last 1024 bytes]\n")
    assert text.splitlines()[1].startswith(b"PROGRESS ")  # a whole line under the note
    assert text.splitlines()[-2].startswith(b"PROGRESS 1.0000")


def test_the_node_keeps_a_bounded_copy_of_stdout(tmp_path):
    copy = BoundedCopy(tmp_path / "stdout.log", cap=1024)
    for n in range(10_000):
        copy.write(f"line {n}\n")
    copy.close()
    kept = (tmp_path / "stdout.log").read_bytes()
    assert len(kept) <= 2 * 1024 + 20
    assert kept.endswith(b"line 9999\n") and kept.startswith(b"[gpusched: earlier lines")
    assert last_lines(b"a\nbb\nccc\n", 6) == (
        b"[gpusched: earlier lines dropped; a log keeps its last 6 bytes]\nccc\n")


def test_nobody_else_reads_it_and_bad_questions_are_4xx(alice, bob, agent, api):
    from jobs.services.tenancy import api_key_issue

    job = run_by_agent(alice, **QUICK)
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_issue(organization=bob, name='k')[1]}")
    url = f"/api/v1/jobs/{job.pk}/log"
    assert other.get(url).status_code == 404
    assert APIClient().get(url).status_code == 401
    for bad, field in (({"stream": "stdin"}, "stream"), ({"rank": -1}, "rank"),
                       ({"tail": 0}, "tail"), ({"tail": "x"}, "tail")):
        answer = api.get(url, bad)
        assert answer.status_code == 400 and field in answer.json()["error"]["fields"]
    answer = api.get(url, {"rank": 1})  # it ran on one node
    assert (answer.status_code, answer.json()["error"]["code"]) == (404, "not_found")
    others = make_job(alice)
    attempt = Attempt.objects.get(job=job)
    assert api.get(f"/api/v1/jobs/{others.pk}/attempts/{attempt.pk}/log").status_code == 404
    assert api.get(f"/api/v1/jobs/{others.pk}/log").json()["error"]["code"] == "not_found"


def test_a_store_that_fails_loses_the_log_and_never_the_job(alice, agent, settings, api):
    blocker = Path(settings.MEDIA_ROOT) / "logs"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("")  # a file where the logs' folder goes: every log's write fails
    job = run_by_agent(alice, **QUICK)
    assert job.state == "SUCCEEDED" and job.output
    attempt = Attempt.objects.get(job=job)
    assert not attempt.log_kept
    answer = api.get(f"/api/v1/jobs/{job.pk}/log")
    assert (answer.status_code, answer.content) == (200, b"")


def test_a_log_past_its_retention_is_deleted_and_the_api_says_so(alice, agent, api, settings):
    job = run_by_agent(alice, **QUICK, fail="crash", fail_at=0.5)
    attempt = Attempt.objects.get(job=job)
    names = [log_name(job.pk, attempt.pk, 0, s) for s in ("stdout", "stderr")]
    assert all(default_storage.exists(n) for n in names)
    settings.GPUSCHED_OUTPUT_RETENTION_DAYS = 30
    assert expire_logs(now=attempt.ended_at + timedelta(days=29)) == 0
    now = attempt.ended_at + timedelta(days=31)
    assert expire_logs(now=now) == 1
    assert not any(default_storage.exists(n) for n in names)
    answer = api.get(f"/api/v1/jobs/{job.pk}/log")
    assert (answer.status_code, answer.json()["error"]["code"]) == (410, "log_expired")
    assert api.get(f"/api/v1/jobs/{job.pk}/attempts").json()["results"][0]["log_url"] is None
    assert expire_logs(now=now + timedelta(days=1)) == 0  # once


def test_members_read_it_on_the_dashboard_and_others_do_not(alice, bob, agent, client):
    job = run_by_agent(alice, **QUICK, fail="crash", fail_at=0.5)
    attempt = Attempt.objects.get(job=job)
    ann, ben = make_member(alice, "ann"), make_member(bob, "ben")
    client.force_login(ann)
    page = client.get(f"/dashboard/jobs/{job.pk}").content.decode()
    assert "SimulatedCrash" in page and "START CUDA_VISIBLE_DEVICES=" in page
    url = f"/dashboard/jobs/{job.pk}/attempts/{attempt.pk}/log"
    assert f'href="{url}?stream=stderr"' in page
    assert b"SimulatedCrash" in client.get(url, {"stream": "stderr"}).content
    assert client.get(url, {"stream": "stdin"}).status_code == 404
    client.force_login(ben)
    assert client.get(url).status_code == 404


def test_an_operator_reads_it_on_the_attempts_admin_page(alice, agent, admin_client):
    job = run_by_agent(alice, **QUICK, fail="crash", fail_at=0.5)
    attempt = Attempt.objects.get(job=job)
    page = admin_client.get(f"/admin/jobs/attempt/{attempt.pk}/change/").content.decode()
    assert "SimulatedCrash" in page and "START CUDA_VISIBLE_DEVICES=" in page


def test_a_chatty_stderr_is_kept_bounded_and_its_end_says_why_it_failed(alice, agent, api,
                                                                        settings, tmp_path):
    import sys

    settings.GPUSCHED_LOG_MAX_BYTES = 1024
    seen = tmp_path / "stderr-size"
    # 2 MB to stderr, one line longer than a read, then its last words; the node's copy is
    # measured before it exits
    settings.GPUSCHED_BINARY = (
        f"{sys.executable} -c \"import os, sys, time; w = sys.stderr.write; "
        "[w('noise %d\\n' % n) for n in range(200000)]; w('x' * 300000 + '\\n'); "
        "w('the last words\\n'); sys.stderr.flush(); time.sleep(1); "
        f"open('{seen}', 'w').write(str(os.path.getsize(os.path.join(os.getcwd(), "
        "'stderr.log')))); sys.exit(3)\"")
    job = run_by_agent(alice)
    assert int(seen.read_text()) <= 2 * 1024 + 100  # not the 2 MB it printed
    attempt = Attempt.objects.get(job=job)
    assert attempt.exit_code == 3 and attempt.stderr_tail.endswith("the last words\n")
    text = api.get(f"/api/v1/jobs/{job.pk}/log", {"stream": "stderr"}).content
    assert text.startswith(b"[gpusched: earlier lines dropped") and len(text) <= 1024 + 100
    assert text.endswith(b"the last words\n")


def test_a_log_storage_does_not_give_is_a_503_to_ask_again(alice, agent, api, settings):
    from tests.support.storage import AwayStorage

    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "tests.support.storage.AwayStorage"}}
    AwayStorage.fails = AwayStorage.reads = 0
    job = run_by_agent(alice, **QUICK)
    AwayStorage.fails = 1
    answer = api.get(f"/api/v1/jobs/{job.pk}/log")
    assert (answer.status_code, answer["Retry-After"]) == (503, "30")
    assert answer.json()["error"]["code"] == "storage_unavailable"
    assert api.get(f"/api/v1/jobs/{job.pk}/log").content.startswith(b"START ")
