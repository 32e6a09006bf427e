"""What a node agent knows about its GPUs, and how it hands them to the binary (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# NVML's UUID form (MIG instances included); configured GPUs have made-up names instead.
_NVML_UUID = re.compile(r"^(GPU|MIG)-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", re.IGNORECASE)
_VENDOR_WORDS = {"NVIDIA", "TESLA", "GEFORCE", "QUADRO"}
_FAMILIES = {"RTX", "GTX", "TITAN"}


@dataclass(frozen=True)
class GpuInfo:
    index: int  # NVML's index: PCI bus order
    uuid: str
    memory_mb: int  # MiB, as NVML reports the total


@dataclass(frozen=True)
class GpuReading:
    """One GPU's health as NVML read it on a heartbeat."""

    uuid: str
    lost: str = ""  # NVML's error when the GPU could not be reached at all
    remap_failed: bool = False  # a row remapping failed: the memory is bad
    remap_pending: bool = False  # rows wait to be remapped: the GPU needs a reset
    retired_pages_pending: bool = False  # pre-Ampere: pages wait to be retired (reset)
    pids: tuple[int, ...] = ()  # processes with a CUDA context on it


def canonical_gpu_type(nvml_name: str) -> str:
    """The type jobs ask for, from NVML's product name.

    "NVIDIA H100 80GB HBM3" and "NVIDIA H100 PCIe" are both H100; "NVIDIA A100-SXM4-80GB" is
    A100; "Tesla V100-SXM2-16GB" is V100; "NVIDIA GeForce RTX 4090" is RTX4090. The memory
    size is the node's own figure and the form factor is not a type jobs choose between.
    """
    words = [w for w in nvml_name.split() if w.upper() not in _VENDOR_WORDS]
    if not words:
        return nvml_name.strip()
    model = words[0].split("-")[0]
    if model.upper() in _FAMILIES and len(words) > 1:
        model += words[1].split("-")[0]
    return model.upper()


def gpu_problem(reading: GpuReading) -> str:
    """Why a GPU must take no new work, or "" when it is fit."""
    if reading.lost:
        return f"unreachable: {reading.lost}"
    if reading.remap_failed:
        return "row remapping failed: replace or repair"
    if reading.remap_pending:
        return "row remapping pending: reset the GPU"
    if reading.retired_pages_pending:
        return "page retirement pending: reset the GPU"
    return ""


def nvml_uuid(uuid: str) -> bool:
    """Whether `uuid` is one NVML gave (configured GPUs have made-up names)."""
    return bool(_NVML_UUID.match(uuid))


def visible_devices(indices: Sequence[int], uuids: Sequence[str]) -> dict[str, str]:
    """The binary's view of its GPUs.

    CUDA numbers devices fastest first unless told PCI bus order, and NVML's indices are bus
    order: without CUDA_DEVICE_ORDER an index could name another job's GPU on a node of mixed
    cards. Discovered GPUs go by UUID, which names one card whatever the order; configured
    ones have no real UUID and go by index.
    """
    by_uuid = len(uuids) == len(indices) and all(map(nvml_uuid, uuids))
    return {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(uuids) if by_uuid else ",".join(map(str, indices)),
        "GPUSCHED_GPU_INDICES": ",".join(map(str, indices)),
        "GPUSCHED_GPU_UUIDS": ",".join(uuids),
    }
