"""The node's GPU watch: what it reports from readings, from a driver that fails, and from
one that stops answering (a thread blocked in a driver call)."""

import threading

from workers.agent.gpu_watch import GpuWatch
from workers.agent.gpus import GpuReading

A, B = "GPU-a", "GPU-b"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _watch(read, clock=None) -> GpuWatch:
    return GpuWatch([A, B], read, every_s=0.01, stale_after_s=30, clock=clock or Clock())


def _problems(watch: GpuWatch) -> dict[str, str]:
    return watch.report().problems


def test_nothing_is_reported_before_the_first_reading():
    assert _watch(lambda uuids: []).report() is None


def test_readings_become_problems_and_busy_gpus():
    watch = _watch(lambda uuids: [GpuReading(A, pids=(41, 42)),
                                  GpuReading(B, remap_pending=True)])
    watch.read_once()
    assert _problems(watch) == {A: "", B: "row remapping pending: reset the GPU"}
    assert watch.report().busy == {A: (41, 42)}


def test_a_driver_that_fails_or_cannot_be_used_makes_every_gpu_suspect():
    def broken(uuids):
        raise RuntimeError("Driver Not Loaded")

    watch = _watch(broken)
    watch.read_once()
    assert _problems(watch) == {A: "NVML failed: Driver Not Loaded",
                                B: "NVML failed: Driver Not Loaded"}
    gone = _watch(lambda uuids: None)
    gone.read_once()
    assert set(_problems(gone).values()) == {"NVML cannot be used"}


def test_a_reading_that_never_returns_marks_every_gpu_once_it_is_stale():
    clock, release = Clock(), threading.Event()
    calls = []

    def read(uuids):
        calls.append(1)
        if len(calls) > 1:
            release.wait(10)  # the second reading hangs in the driver
        return [GpuReading(A), GpuReading(B)]

    watch = _watch(read, clock)
    watch.read_once()
    watch.start()  # its thread reads again, and hangs there
    clock.now = 29
    assert _problems(watch) == {A: "", B: ""}
    clock.now = 31
    assert _problems(watch) == {A: "NVML has not answered for 31 s",
                                B: "NVML has not answered for 31 s"}
    watch.stop()
    release.set()


def test_a_reading_apart_says_none_where_nvml_cannot_be_used():
    import importlib.util

    import pytest

    from workers.agent.discovery import read_gpus_apart

    if importlib.util.find_spec("pynvml") is not None:
        pytest.skip("this host has NVML: tests/gpu reads it")
    assert read_gpus_apart([A, B], timeout_s=30) is None


def test_a_reading_stopped_with_the_node_leaves_the_last_one_standing():
    """A node stopped by a signal to its process group stops its reading's process too:
    that says nothing about the GPUs, so no GPU is marked as the node goes down; a node
    whose readings are never let finish still marks every GPU once the last is stale."""
    from workers.agent.discovery import ReadingInterrupted

    clock, calls = Clock(), []

    def read(uuids):
        calls.append(1)
        if len(calls) > 1:
            raise ReadingInterrupted("stopped by signal 15")
        return [GpuReading(A), GpuReading(B, pids=(7,))]

    watch = _watch(read, clock)
    watch.read_once()
    clock.now = 5
    watch.read_once()
    assert _problems(watch) == {A: "", B: ""} and watch.report().busy == {B: (7,)}
    clock.now = 31
    assert set(_problems(watch).values()) == {"NVML has not answered for 31 s"}


def test_a_reading_process_ended_by_a_signal_to_stop_is_told_from_a_driver_failure():
    import signal
    import subprocess
    import sys

    from workers.agent.discovery import ReadingInterrupted, reading_failed

    done = subprocess.run([sys.executable, "-c",
                           "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
                          capture_output=True, text=True, check=False)
    assert isinstance(reading_failed(done.returncode, done.stderr), ReadingInterrupted)
    killed = reading_failed(-signal.SIGKILL, "")  # the kernel's OOM killer, say: suspect
    assert not isinstance(killed, ReadingInterrupted) and str(killed) == "exit -9"
    failed = reading_failed(1, "Traceback …\npynvml.NVMLError_Unknown: Unknown Error\n")
    assert type(failed) is RuntimeError and str(failed).endswith("Unknown Error")
