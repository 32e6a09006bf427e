"""A stand-in binary for GPU hosts: it records which devices the CUDA driver shows it, then
runs the fake generator with its own arguments, so the job still follows the contract.

`python cuda_probe.py --list` prints one UUID per device CUDA shows, or "none".
A job's `leave_gpu_process_s` param makes it leave behind, in a session of its own (as a
daemonising child does), a process that holds a CUDA context on its GPU that many seconds
and then writes the time it let go to `left-<attempt>` in the probe directory.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def seen_by_cuda() -> list[str]:
    """The UUIDs of the devices the CUDA driver shows this process (lower case)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:  # no driver on this host
        return []
    if cuda.cuInit(0) != 0:  # CUDA_ERROR_NO_DEVICE when nothing visible is on the host
        return []
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    seen = []
    for i in range(count.value):
        dev, raw = ctypes.c_int(), (ctypes.c_char * 16)()
        cuda.cuDeviceGet(ctypes.byref(dev), i)
        cuda.cuDeviceGetUuid(raw, dev)
        h = bytes(raw).hex()
        seen.append(f"gpu-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return seen


def hold_a_context(seconds: float, record: Path) -> None:
    """Hold a context on the first visible device, say so, and let go after `seconds`."""
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    assert cuda.cuCtxSetCurrent(ctx) == 0
    print("ready", flush=True)
    time.sleep(seconds)
    record.write_text(f"{time.time()}\n")


def _leave_a_process(seconds: float, record: Path) -> None:
    child = subprocess.Popen([sys.executable, __file__, "--hold", str(seconds), str(record)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    assert child.stdout.readline().strip() == "ready"  # the context exists before the job ends


def _param(argv: list[str], name: str) -> str | None:
    if "--params-file" not in argv:
        return None
    path = argv[argv.index("--params-file") + 1]
    value = json.loads(Path(path).read_text()).get(name)
    return None if value is None else str(value)


def main() -> None:
    if sys.argv[1:] == ["--list"]:
        print("\n".join(seen_by_cuda()) or "none")
        return
    if sys.argv[1:2] == ["--hold"]:
        hold_a_context(float(sys.argv[2]), Path(sys.argv[3]))
        return
    probe_dir, attempt = Path(os.environ["GPUSCHED_PROBE_DIR"]), os.environ["GPUSCHED_ATTEMPT_ID"]
    (probe_dir / f"attempt-{attempt}").write_text(
        f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}\n{' '.join(seen_by_cuda()) or 'none'}\n")
    leave = _param(sys.argv, "leave_gpu_process_s")
    if leave:
        _leave_a_process(float(leave), probe_dir / f"left-{attempt}")
    os.execv(sys.executable, [sys.executable, "-m", "workers.fakegen", *sys.argv[1:]])


if __name__ == "__main__":
    main()
