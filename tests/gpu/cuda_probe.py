"""A stand-in binary for GPU hosts: it records which devices the CUDA driver shows it, then
runs the fake generator with its own arguments, so the job still follows the contract.

`python cuda_probe.py --list` prints one UUID per device CUDA shows, or "none".
"""

from __future__ import annotations

import ctypes
import os
import sys
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


def main() -> None:
    if sys.argv[1:] == ["--list"]:
        print("\n".join(seen_by_cuda()) or "none")
        return
    record = Path(os.environ["GPUSCHED_PROBE_DIR"]) / f"attempt-{os.environ['GPUSCHED_ATTEMPT_ID']}"
    record.write_text(f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}\n"
                      f"{' '.join(seen_by_cuda()) or 'none'}\n")
    os.execv(sys.executable, [sys.executable, "-m", "workers.fakegen", *sys.argv[1:]])


if __name__ == "__main__":
    main()
