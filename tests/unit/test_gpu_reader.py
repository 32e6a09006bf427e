"""The node's long-lived reading process: reused while it answers, replaced when it is late,
told to end, or fails. Where there is no NVML it answers None (tests/gpu reads real GPUs)."""

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workers.agent.discovery import ReadingInterrupted
from workers.agent.gpu_reader import GpuReader

UUIDS = ["GPU-a", "GPU-b"]
no_nvml = pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None,
                             reason="this host has NVML: tests/gpu reads it")


def _gone(pid: int, within_s: float = 10) -> bool:
    """The process has ended (a zombie not yet reaped counts: it runs no more)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@no_nvml
def test_one_process_answers_reading_after_reading():
    reader = GpuReader(timeout_s=30)
    try:
        assert reader(UUIDS) is None
        pid = reader.pid
        assert [reader(UUIDS) for _ in range(3)] == [None] * 3 and reader.pid == pid
    finally:
        reader.close()
    assert _gone(pid)


@no_nvml
def test_a_reading_process_told_to_end_interrupts_one_reading_and_is_replaced():
    reader = GpuReader(timeout_s=30)
    try:
        reader(UUIDS)
        first = reader.pid
        os.kill(first, signal.SIGTERM)
        assert _gone(first)
        with pytest.raises(ReadingInterrupted):
            reader(UUIDS)
        assert reader(UUIDS) is None and reader.pid not in (None, first)
    finally:
        reader.close()


def test_a_reading_process_that_hangs_is_killed_at_its_timeout_and_replaced(tmp_path):
    """As one stuck in a driver call: each reading gets a process of its own, killed."""
    pids = tmp_path / "pids"
    hangs = [sys.executable, "-c", "import os, sys, time; "
             f"open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); "
             "sys.stdin.readline(); time.sleep(60)"]
    reader = GpuReader(timeout_s=0.5, argv=hangs)
    for _ in range(2):
        with pytest.raises(TimeoutError, match="no answer"):
            reader(UUIDS)
        assert reader.pid is None
    started = [int(p) for p in pids.read_text().split()]
    assert len(set(started)) == 2 and all(_gone(p) for p in started)


def test_a_reading_process_that_fails_says_why():
    fails = [sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit('NVML blew up')"]
    reader = GpuReader(timeout_s=30, argv=fails)
    with pytest.raises(RuntimeError, match="NVML blew up") as raised:
        reader(UUIDS)
    assert not isinstance(raised.value, ReadingInterrupted)


def test_a_reading_process_ends_with_the_agent_though_a_forked_process_holds_its_pipe():
    """A pool process forked from the agent holds the reader's stdin open: when the agent is
    killed, the reader must not live on (NVML held) for as long as that process does."""
    script = (
        "import os, sys, time\n"
        "from workers.agent.gpu_reader import GpuReader\n"
        "reader = GpuReader(timeout_s=30)\n"
        "reader(['GPU-a'])\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    os.close(1); os.close(2); time.sleep(60); os._exit(0)\n"
        "print(reader.pid, child, flush=True)\n"
        "os._exit(0)\n")  # as a kill -9 would: no close, no cleanup
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60, cwd=Path(__file__).resolve().parents[2], check=True)
    reader_pid, holder = map(int, done.stdout.split())
    try:
        assert _gone(reader_pid, within_s=15)
    finally:
        os.kill(holder, signal.SIGKILL)


def test_a_reading_process_that_writes_much_to_stderr_is_never_held_up_by_it():
    """A driver library's warning every reading fills a pipe nobody reads in a few hundred
    readings, and a process writing to a full pipe answers no more."""
    chatty = [sys.executable, "-c", "import sys\nfor line in sys.stdin:\n"
              "    sys.stderr.write('w' * 100_000)\n    print('null', flush=True)"]
    reader = GpuReader(timeout_s=5, argv=chatty)
    try:
        assert [reader(UUIDS) for _ in range(5)] == [None] * 5
    finally:
        reader.close()
