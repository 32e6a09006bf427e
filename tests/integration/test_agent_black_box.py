"""A binary that prints bytes that are not UTF-8 (NUL among them) is judged by what it does:
it is not taken for hung while it prints, and its crash is recorded, stderr and all; what it
leaves running when it exits does not outlive it on the job's GPUs."""

import contextlib
import os
import signal
import sys

import pytest

from jobs.models import Attempt, GpuBinding
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node
from workers.agent.runner import run_attempt

pytestmark = pytest.mark.django_db(transaction=True)

NOISY = {"noise": 1, "run_seconds": 3, "progress_interval": 0.25}


@pytest.fixture
def agent(settings, tmp_path):
    settings.GPUSCHED_WORK_ROOT = tmp_path
    settings.GPUSCHED_HEARTBEAT_SECONDS = 0.25
    settings.GPUSCHED_HANG_TIMEOUT_S = 1.5  # half the run: a dead stdout reader trips it
    settings.GPUSCHED_KILL_GRACE_S = 1


def _run(alice, params):
    make_node("n1", gpus=1)
    job = make_job(alice, **params)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    outcome = run_attempt(attempt.pk, attempt.token)
    job.refresh_from_db()
    return outcome, job


def test_a_noisy_binary_that_succeeds_is_not_taken_for_hung(alice, agent):
    outcome, job = _run(alice, NOISY)
    assert (outcome, job.state) == ("SUCCEEDED", "SUCCEEDED"), job.error
    # PROGRESS lines read past the noise (the last heartbeat comes before the end)
    assert Attempt.objects.get(job=job).progress >= 0.5
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


def test_a_noisy_crash_is_recorded_with_its_stderr(alice, agent):
    outcome, job = _run(alice, {**NOISY, "fail": "crash", "fail_at": 0.5})
    assert (outcome, job.state) == ("FAILED", "RETRY_WAIT")  # a crash is tried again
    attempt = Attempt.objects.get(job=job)
    assert "SimulatedCrash" in attempt.stderr_tail and "\x00" not in attempt.stderr_tail
    assert "\ufffd" in attempt.stderr_tail  # the undecodable bytes, shown as replaced
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that no longer reaps."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_what_the_binary_leaves_running_is_killed_when_it_exits(alice, agent, settings,
                                                                tmp_path):
    pidfile = tmp_path / "child.pid"
    # starts a child that would outlive it on the job's GPUs, then exits at once
    settings.GPUSCHED_BINARY = (
        f"{sys.executable} -c \"import subprocess; p = subprocess.Popen(['sleep', '120']); "
        f"open('{pidfile}', 'w').write(str(p.pid))\"")
    _run(alice, {})
    child = int(pidfile.read_text())
    try:
        assert not _alive(child)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
