"""A binary that prints bytes that are not UTF-8 (NUL among them) is judged by what it does:
it is not taken for hung while it prints, and its crash is recorded, stderr and all; what it
leaves running when it exits does not outlive it on the job's GPUs, nor does the binary
outlive a fault of the agent's own. An output that leads elsewhere is none, and params no
command line can carry fail the job at once."""

import contextlib
import os
import signal
import sys
import textwrap

import pytest

from jobs.models import Attempt, GpuBinding, Job, StoredCheckpoint
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node
from workers.agent.logs import LogPublisher
from workers.agent.runner import run_attempt
from workers.fakegen.video import render_y4m

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


def _binary(tmp_path, code: str) -> str:
    """A binary of this Python code, given its output and checkpoint directory as argv."""
    script = tmp_path / "binary.py"
    script.write_text(textwrap.dedent(code))
    return f"{sys.executable} {script} {{output}} {{checkpoint_dir}}"


def test_a_fault_of_the_agents_own_as_it_supervises_kills_the_binary(alice, agent, settings,
                                                                    tmp_path, monkeypatch):
    """Left running, unwatched, the binary would hold GPUs the reaper hands to another job."""
    pidfile = tmp_path / "binary.pid"
    settings.GPUSCHED_BINARY = _binary(tmp_path, f"""
        import os, time
        open({str(pidfile)!r} + ".new", "w").write(str(os.getpid()))
        os.rename({str(pidfile)!r} + ".new", {str(pidfile)!r})  # whole once it is there
        for _ in range(600):
            print("PROGRESS 0.1000", flush=True)
            time.sleep(0.1)
        """)

    def fails(self) -> None:
        if pidfile.exists():
            raise RuntimeError("a fault of the agent's own")

    monkeypatch.setattr(LogPublisher, "due", fails)
    try:
        outcome, job = _run(alice, {})
        assert not _alive(int(pidfile.read_text()))
    finally:
        with contextlib.suppress(ProcessLookupError, FileNotFoundError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
    assert (outcome, job.state) == ("FAILED", "RETRY_WAIT")  # the node's fault: tried again
    assert job.events.get(to_state="RETRY_WAIT").data["error_code"] == "launch_failed"
    assert "a fault of the agent's own" in Attempt.objects.get(job=job).stderr_tail
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


def test_a_binary_that_removes_its_checkpoint_directory_is_supervised_on(alice, agent,
                                                                        settings, tmp_path):
    """A copy taken from it is handed out, though its directory is gone for its marker."""
    settings.GPUSCHED_STORE_CHECKPOINTS = True
    settings.GPUSCHED_HEARTBEAT_SECONDS = 1  # the copy is taken a beat after it is linked
    settings.GPUSCHED_BINARY = _binary(tmp_path, """
        import glob, os, shutil, sys, time
        checkpoint = sys.argv[2]
        open(os.path.join(checkpoint, "state.json"), "w").write('{"step": 1}')
        print(f"CHECKPOINT {checkpoint} step=1", flush=True)
        linked = os.path.join(os.path.dirname(checkpoint), ".checkpoint-copy-*", "state.json")
        until = time.monotonic() + 0.5
        while not glob.glob(linked) and time.monotonic() < until:
            print("PROGRESS 0.1000", flush=True)
            time.sleep(0.01)
        shutil.rmtree(checkpoint)  # as a binary that rotates its checkpoints may
        for _ in range(60):  # beats enough, on a busy machine, for the copy to be reported
            print("PROGRESS 0.5000", flush=True)
            time.sleep(0.1)
        sys.exit(1)
        """)
    outcome, job = _run(alice, {})
    assert (outcome, job.state) == ("FAILED", "RETRY_WAIT")
    assert job.events.get(to_state="RETRY_WAIT").data["error_code"] == "exit_1"  # its own
    assert StoredCheckpoint.objects.filter(attempt__job=job, step=1).exists()


@pytest.mark.parametrize("seed", ["forty-two", None, [4, 2]])
def test_a_seed_that_is_no_integer_fails_the_job_at_once(alice, agent, seed):
    """Intake refuses one; a job submitted before it did may hold one. Each try would fail
    on it: no retry."""
    make_node("n1", gpus=1)
    job = make_job(alice)
    scheduler_tick_run()
    Job.objects.filter(pk=job.pk).update(params={"seed": seed})
    attempt = Attempt.objects.get(job=job)
    assert run_attempt(attempt.pk, attempt.token) == "FAILED"
    job.refresh_from_db()
    assert (job.state, job.error_code, job.retries) == ("FAILED", "exit_2", 0)
    assert "seed" in job.error or "int()" in job.error
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


ELSEWHERE = {
    "a link": "os.symlink(elsewhere, output)",
    "a work directory made a link": ("os.rename(os.path.dirname(output), away); "
                                     "os.symlink(away, os.path.dirname(output)); "
                                     "shutil.copy(elsewhere, output)"),
}


@pytest.mark.parametrize("how", ELSEWHERE)
def test_an_output_that_leads_elsewhere_is_none(alice, agent, settings, tmp_path, how):
    """What it leads to is no file of this try's (another job's output, the node's own),
    which the job's owner would get."""
    elsewhere = tmp_path / "elsewhere.y4m"
    elsewhere.write_bytes(render_y4m("a cat", 0, 64, 48, 8, 2))  # a whole video
    settings.GPUSCHED_BINARY = _binary(tmp_path, f"""
        import os, shutil, sys
        output, elsewhere, away = sys.argv[1], {str(elsewhere)!r}, {str(tmp_path / "away")!r}
        {ELSEWHERE[how]}
        print(f"OUTPUT {{output}}", flush=True)
        """)
    outcome, job = _run(alice, {})
    assert (outcome, job.state) == ("FAILED", "RETRY_WAIT"), job.error
    assert job.events.get(to_state="RETRY_WAIT").data["error_code"] == "corrupt_output"


def test_a_template_no_command_line_comes_of_is_the_nodes_fault(alice, agent, settings):
    """An operator's quote left open fails the launch on that node: retried elsewhere and
    counted against the node, never blamed on the job's input."""
    settings.GPUSCHED_BINARY = f"{sys.executable} -c 'print(1)"
    make_node("n1", gpus=1)
    job = make_job(alice)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    assert run_attempt(attempt.pk, attempt.token) == "FAILED"
    job.refresh_from_db()
    assert (job.state, job.retries) == ("RETRY_WAIT", 1)
    assert job.events.get(to_state="RETRY_WAIT").data["error_code"] == "launch_failed"
