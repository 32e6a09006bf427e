"""On a host with an NVIDIA GPU and its driver: what the node agent discovers and binds.

Skipped elsewhere (CI has no GPU). Needs no Django and no services, so it also runs alone:
    python3 -m pytest tests/gpu -p no:cacheprovider --noconftest -c /dev/null
The child process asks the CUDA driver itself which devices it sees, so the check holds for
any binary, whatever framework it is built on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workers.agent.discovery import discover_nvml, processes_left, read_gpus, read_gpus_apart
from workers.agent.gpu_reader import GpuReader
from workers.agent.gpus import canonical_gpu_type, gpu_problem, visible_devices

FOUND = discover_nvml()
pytestmark = pytest.mark.skipif(FOUND is None, reason="no NVML GPU on this host")

PROBE = Path(__file__).with_name("cuda_probe.py")


def _seen_by_cuda(env_update: dict[str, str]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_")}
    out = subprocess.run([sys.executable, str(PROBE), "--list"], env={**env, **env_update},
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.split()


def test_discovery_names_the_type_jobs_ask_for_and_real_uuids():
    gpu_type, gpus = FOUND
    assert gpu_type and gpu_type == canonical_gpu_type(gpu_type)
    assert not gpu_type.startswith("NVIDIA")
    assert [g.index for g in gpus] == list(range(len(gpus)))
    assert all(g.memory_mb > 1024 for g in gpus)
    assert visible_devices([0], [gpus[0].uuid])["CUDA_VISIBLE_DEVICES"] == gpus[0].uuid


def test_a_binary_sees_exactly_the_gpu_it_is_bound_to():
    _, gpus = FOUND
    for gpu in gpus:
        assert _seen_by_cuda(visible_devices([gpu.index], [gpu.uuid])) == [gpu.uuid.lower()]


def test_by_index_the_binary_sees_the_same_card_nvml_numbered():
    _, gpus = FOUND
    for gpu in gpus:
        assert _seen_by_cuda(visible_devices([gpu.index], ["GPU-sim-x"])) == [gpu.uuid.lower()]


def test_a_gpu_that_is_not_on_the_node_leaves_the_binary_no_device():
    absent = "GPU-00000000-0000-0000-0000-000000000000"
    assert _seen_by_cuda(visible_devices([0], [absent])) == ["none"]


def test_health_reads_fit_cards_as_fit_and_a_missing_card_as_unreachable():
    _, gpus = FOUND
    readings = read_gpus([g.uuid for g in gpus] + ["GPU-00000000-0000-0000-0000-000000000000"])
    assert [gpu_problem(r) for r in readings[:-1]] == [""] * len(gpus)
    assert gpu_problem(readings[-1]).startswith("unreachable")
    apart = read_gpus_apart([g.uuid for g in gpus], timeout_s=30)  # in a process of its own
    assert [gpu_problem(r) for r in apart] == [""] * len(gpus)


def test_one_long_lived_process_reads_the_cards_again_and_again():
    _, gpus = FOUND
    reader = GpuReader(timeout_s=30)
    try:
        readings = [reader([g.uuid for g in gpus]) for _ in range(3)]
        pid = reader.pid
        assert reader([g.uuid for g in gpus]) == readings[0] and reader.pid == pid
    finally:
        reader.close()
    assert [[gpu_problem(r) for r in rs] for rs in readings] == [[""] * len(gpus)] * 3


def _pids_seen(reader: GpuReader, uuid: str, *, gone: bool, within_s: float = 10) -> tuple:
    """What the reader sees using `uuid` once it sees processes there (or none, `gone`)."""
    deadline = time.monotonic() + within_s
    while True:
        (reading,) = reader([uuid])
        if bool(reading.pids) != gone or time.monotonic() > deadline:
            return reading.pids
        time.sleep(0.25)


def test_a_process_left_on_a_gpu_is_found_until_it_ends(tmp_path):
    _, gpus = FOUND
    gpu = gpus[0]
    reader = GpuReader(timeout_s=30)  # the node's watch: one NVML session, reading after reading
    assert _pids_seen(reader, gpu.uuid, gone=True) == ()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_")}
    child = subprocess.Popen([sys.executable, str(PROBE), "--hold", "120",
                              str(tmp_path / "let-go")],
                             env={**env, **visible_devices([gpu.index], [gpu.uuid])},
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        left = processes_left([gpu.uuid], wait_s=0.5)
        assert list(left) == [gpu.uuid] and left[gpu.uuid]  # pids as the driver numbers them
        assert _pids_seen(reader, gpu.uuid, gone=False) == left[gpu.uuid]
    finally:
        child.kill()
        child.wait()
    assert processes_left([gpu.uuid], wait_s=10) == {}
    assert _pids_seen(reader, gpu.uuid, gone=True) == ()
    reader.close()
    assert processes_left(["GPU-sim-n1-0"]) == {}  # configured GPUs: nothing to read
