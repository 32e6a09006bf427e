"""Find the node's GPUs and read their health: NVML where a GPU and its driver exist,
configuration otherwise. Nothing here needs Django."""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict
from pathlib import Path

from workers.agent.gpus import GpuInfo, GpuReading, canonical_gpu_type, nvml_uuid

log = logging.getLogger(__name__)
CODE_ROOT = Path(__file__).resolve().parents[2]  # where `-m workers.agent.discovery` is found
READ_TIMEOUT_S = 10.0  # a reading takes about 15 ms in NVML, plus a Python start


class DiscoveryError(Exception):
    """NVML found GPUs that one node record cannot describe."""


class ReadingInterrupted(RuntimeError):
    """The reading's process was told to end (the node stopping, its group signalled): it
    says nothing about the GPUs, where a driver's failure does."""


# what a service manager or a terminal sends a node's whole process group as it stops it
_ASKED_TO_END = {-signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@contextmanager
def _nvml() -> Iterator[object | None]:
    """pynvml, initialised, or None where there is no NVML library or driver."""
    try:
        import pynvml  # nvidia-ml-py, present on GPU hosts only
    except ImportError:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        log.info("NVML not usable: %s", exc)
        yield None
        return
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def discover_nvml() -> tuple[str, list[GpuInfo]] | None:
    """(gpu type, GPUs) from NVML, or None where there is no NVML library or no GPU."""
    with _nvml() as nv:
        if nv is None:
            return None
        names, gpus = set(), []
        for i in range(nv.nvmlDeviceGetCount()):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            names.add(_text(nv.nvmlDeviceGetName(handle)))
            memory = nv.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            gpus.append(GpuInfo(i, _text(nv.nvmlDeviceGetUUID(handle)), memory))
    if not gpus:
        return None
    types = {canonical_gpu_type(n) for n in names}
    if len(types) > 1:
        # A node record has one type; mislabelling cards would place jobs on the wrong ones.
        raise DiscoveryError(f"GPUs of several types on one node: {', '.join(sorted(names))}")
    return types.pop(), gpus


def read_gpus(uuids: Sequence[str]) -> list[GpuReading] | None:
    """Each GPU's health from NVML, or None where NVML cannot be used at all."""
    with _nvml() as nv:
        if nv is None:
            return None
        return [_read_one(nv, uuid) for uuid in uuids]


def read_gpus_apart(uuids: Sequence[str], *, timeout_s: float) -> list[GpuReading] | None:
    """`read_gpus` in a process of its own, killed if it takes longer than `timeout_s`.

    A GPU in a bad state can hang a driver call. In the agent's own process that call would
    hang for good, and a Celery pool process forked meanwhile could inherit NVML's locks
    held; a child process is simply killed. Raises TimeoutError, ReadingInterrupted or
    RuntimeError.
    """
    argv = [sys.executable, "-m", "workers.agent.discovery", "--read", *uuids]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              cwd=CODE_ROOT, check=False)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"no answer in {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise reading_failed(done.returncode, done.stderr)
    return readings_from_json(done.stdout)


def readings_from_json(text: str) -> list[GpuReading] | None:
    """What a reading's process printed: a JSON list of readings, or null without NVML."""
    found = json.loads(text)
    return None if found is None else [GpuReading(**{**r, "pids": tuple(r["pids"])})
                                       for r in found]


def reading_failed(returncode: int, stderr: str) -> RuntimeError:
    """Why a reading's process ended without a reading."""
    if returncode in _ASKED_TO_END:
        return ReadingInterrupted(f"stopped by signal {-returncode}")
    lines = stderr.strip().splitlines()
    return RuntimeError(lines[-1] if lines else f"exit {returncode}")


def _read_one(nv, uuid: str) -> GpuReading:
    try:
        handle = nv.nvmlDeviceGetHandleByUUID(uuid)
        nv.nvmlDeviceGetMemoryInfo(handle)  # a call that must reach the card itself
    except nv.NVMLError as exc:
        return GpuReading(uuid, lost=str(exc) or type(exc).__name__)
    remap_failed = remap_pending = retired_pending = False
    try:
        _, _, pending, failed = nv.nvmlDeviceGetRemappedRows(handle)
        remap_pending, remap_failed = bool(pending), bool(failed)
    except nv.NVMLError:  # before Ampere: page retirement instead
        # where neither is reported (virtual GPUs, some drivers) there is nothing to judge
        with suppress(nv.NVMLError):
            retired_pending = bool(nv.nvmlDeviceGetRetiredPagesPendingStatus(handle))
    pids: tuple[int, ...] = ()
    with suppress(nv.NVMLError):
        pids = tuple(sorted(p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(handle)))
    return GpuReading(uuid, remap_failed=remap_failed, remap_pending=remap_pending,
                      retired_pages_pending=retired_pending, pids=pids)


def processes_left(uuids: Sequence[str], *, wait_s: float = 5.0,
                   every_s: float = 0.25) -> dict[str, tuple[int, ...]]:
    """uuid -> pids of the processes still using these GPUs once `wait_s` has passed (the
    driver takes a moment to tear down a killed process's context); {} without NVML, or
    when NVML does not answer (the node's GPU watch then marks every GPU)."""
    if not uuids or not all(nvml_uuid(u) for u in uuids):
        return {}
    deadline = time.monotonic() + wait_s
    while True:
        try:
            readings = read_gpus_apart(uuids, timeout_s=READ_TIMEOUT_S)
        except (TimeoutError, RuntimeError) as exc:
            log.warning("could not read GPUs %s: %s", ", ".join(uuids), exc)
            return {}
        busy = {r.uuid: r.pids for r in readings or () if r.pids}
        if not busy or time.monotonic() >= deadline:
            return busy
        time.sleep(every_s)


def configured_gpus(node: str, count: int, memory_mb: int) -> list[GpuInfo]:
    """Simulated GPUs with stable, node-unique UUIDs."""
    return [GpuInfo(i, f"GPU-sim-{node}-{i}", memory_mb) for i in range(count)]


def _as_json(readings: list[GpuReading] | None) -> str:
    return json.dumps(None if readings is None else [asdict(r) for r in readings])


def serve_readings(*, parent_check_s: float = 2.0) -> None:
    """Answer each line of JSON UUIDs on stdin with a line of their readings (`GpuReader`),
    NVML initialised once for the process's life, until stdin ends or the agent that
    started it is gone: Celery's pool processes, forked from the agent, hold this pipe too,
    and one that outlived a killed agent would keep it open."""
    parent = os.getppid()
    with _nvml() as nv:
        while True:  # one request at a time: nothing waits in stdin's buffer when it selects
            if not select.select([sys.stdin], [], [], parent_check_s)[0]:
                if os.getppid() != parent:
                    return
                continue
            line = sys.stdin.readline()
            if not line:
                return
            uuids = json.loads(line)
            print(_as_json(None if nv is None else [_read_one(nv, u) for u in uuids]),
                  flush=True)


if __name__ == "__main__":  # python -m workers.agent.discovery --read UUID ... | --serve
    if sys.argv[1:2] == ["--read"]:
        print(_as_json(read_gpus(sys.argv[2:])))
    elif sys.argv[1:] == ["--serve"]:
        serve_readings()
