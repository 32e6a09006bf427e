"""What reading a node's GPUs costs on a host with an NVIDIA GPU: discovery at the agent's
start, and the health reading taken once a heartbeat: in the agent's process, in a process
started for the reading (what an attempt's end does), and by the long-lived process the
node's watch keeps (so that a hung driver call cannot stop the agent).

    python bench/nvml_reading.py [--rounds 30]

Needs no Django. The baseline is the reading in the agent's own process (NVML initialised
for it); the ratios say what reading apart costs against it. Exits 1 where NVML finds no GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.agent.discovery import (  # noqa: E402 - after the path is set
    READ_TIMEOUT_S,
    discover_nvml,
    processes_left,
    read_gpus,
    read_gpus_apart,
)
from workers.agent.gpu_reader import GpuReader  # noqa: E402


def median_ms(call: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    found = discover_nvml()
    if found is None:
        print("no NVML GPU on this host")
        return 1
    gpu_type, gpus = found
    uuids = [g.uuid for g in gpus]
    print(f"{len(gpus)} x {gpu_type}, {gpus[0].memory_mb} MiB; medians of {args.rounds}")
    discovery = median_ms(discover_nvml, args.rounds)
    inside = median_ms(lambda: read_gpus(uuids), args.rounds)
    apart = median_ms(lambda: read_gpus_apart(uuids, timeout_s=READ_TIMEOUT_S), args.rounds)
    idle = median_ms(lambda: processes_left(uuids), args.rounds)
    reader = GpuReader(timeout_s=READ_TIMEOUT_S)
    reader(uuids)  # started, NVML initialised: what every later heartbeat finds
    kept = median_ms(lambda: reader(uuids), args.rounds)
    reader.close()
    print(f"discovery                          {discovery:8.1f} ms")
    print(f"reading, in the agent's process    {inside:8.1f} ms  (baseline)")
    print(f"reading, in a process of its own   {apart:8.1f} ms  ratio {apart / inside:.1f}")
    print(f"leftover check after an attempt    {idle:8.1f} ms  (GPUs idle: one reading)")
    print(f"reading, by the watch's process    {kept:8.1f} ms  ratio {kept / inside:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
