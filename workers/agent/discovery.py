"""Find the node's GPUs: NVML where a GPU and its driver exist, configuration otherwise."""

from __future__ import annotations

import logging

from workers.services.nodes import GpuInfo

log = logging.getLogger(__name__)


def discover_nvml() -> tuple[str, list[GpuInfo]] | None:
    """(gpu type, GPUs) from NVML, or None where there is no NVML library or no GPU."""
    try:
        import pynvml  # nvidia-ml-py, present on GPU hosts only
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        log.info("NVML not usable: %s", exc)
        return None
    try:
        gpus, gpu_type = [], ""
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            gpu_type = gpu_type or (name.decode() if isinstance(name, bytes) else name)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            gpus.append(GpuInfo(i, uuid.decode() if isinstance(uuid, bytes) else uuid, memory))
        return (gpu_type, gpus) if gpus else None
    finally:
        pynvml.nvmlShutdown()


def configured_gpus(node: str, count: int, memory_mb: int) -> list[GpuInfo]:
    """Simulated GPUs with stable, node-unique UUIDs."""
    return [GpuInfo(i, f"GPU-sim-{node}-{i}", memory_mb) for i in range(count)]
