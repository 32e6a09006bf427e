"""On a host with an NVIDIA GPU: what real frameworks print when the GPU runs out of memory,
or when a kernel fails, is judged as the agent judges a binary's end (`outcome.classify`,
on the last STDERR_TAIL bytes of stderr). An out-of-memory end is not retried on the same
GPUs; a crash is. A framework the host lacks is skipped; no GPU, everything is."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from workers.agent.discovery import discover_nvml
from workers.agent.gpus import visible_devices
from workers.agent.outcome import STDERR_TAIL, classify

FOUND = discover_nvml()
pytestmark = pytest.mark.skipif(FOUND is None, reason="no NVML GPU on this host")

HUGE = 1 << 48  # 256 TiB: more than any GPU has
RUNS_OUT = {
    "torch": f"import torch; torch.empty({HUGE}, dtype=torch.uint8, device='cuda')",
    "cupy": f"import cupy; cupy.empty({HUGE}, dtype=cupy.uint8)",
    "jax": f"import jax.numpy as jnp; jnp.zeros({HUGE}, dtype=jnp.uint8).block_until_ready()",
}
# an index out of range read on the GPU: the kernel's assert, not a lack of memory
KERNEL_FAILS = ("import torch; x = torch.zeros(4, device='cuda'); "
                "i = torch.tensor([99], device='cuda'); print(x[i].sum().item())")


def _end_of(code: str) -> tuple[str, str]:
    _, gpus = FOUND
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "XLA_"))}
    env.update(visible_devices([0], [gpus[0].uuid]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          timeout=300)
    tail = done.stderr[-STDERR_TAIL:].decode(errors="replace")
    return classify(exit_code=done.returncode, stderr_tail=tail, stop="",
                    output_ok=False), tail


@pytest.mark.parametrize("framework", sorted(RUNS_OUT))
def test_a_framework_out_of_gpu_memory_ends_as_out_of_memory(framework):
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed here")
    judged, tail = _end_of(RUNS_OUT[framework])
    assert judged == ("OOM", "out_of_memory"), tail


def test_a_kernel_that_fails_ends_as_a_crash_not_out_of_memory():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    (outcome, error_code), tail = _end_of(KERNEL_FAILS)
    assert outcome == "FAILED" and error_code.startswith("exit_"), tail
    assert "device-side assert" in tail or "CUDA error" in tail, tail
