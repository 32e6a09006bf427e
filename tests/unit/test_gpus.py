"""How the node agent names its GPU type, judges a GPU's health and binds GPUs (pure)."""

import pytest

from workers.agent.gpus import GpuReading, canonical_gpu_type, gpu_problem, visible_devices

UUID_A = "GPU-5e1b0c2a-7f3d-4c1e-9a8b-0123456789ab"
UUID_B = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


@pytest.mark.parametrize(("nvml_name", "gpu_type"), [
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA H100 PCIe", "H100"),
    ("NVIDIA H100 NVL", "H100"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA B200", "B200"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100 80GB PCIe", "A100"),
    ("A100-SXM4-40GB", "A100"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA L4", "L4"),
    ("Tesla V100-SXM2-16GB", "V100"),
    ("Tesla T4", "T4"),
    ("NVIDIA GeForce RTX 4090", "RTX4090"),
    ("NVIDIA RTX A6000", "RTXA6000"),
])
def test_nvml_product_names_become_the_types_jobs_ask_for(nvml_name, gpu_type):
    assert canonical_gpu_type(nvml_name) == gpu_type


def test_discovered_gpus_are_bound_by_uuid_in_pci_bus_order():
    env = visible_devices([3, 1], [UUID_A, UUID_B])
    assert env["CUDA_VISIBLE_DEVICES"] == f"{UUID_A},{UUID_B}"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["GPUSCHED_GPU_INDICES"] == "3,1"


def test_configured_gpus_without_real_uuids_are_bound_by_index():
    assert visible_devices([1, 3], ["GPU-sim-n1-1", "GPU-sim-n1-3"])[
        "CUDA_VISIBLE_DEVICES"] == "1,3"
    # a missing UUID cannot stand for its card: all go by index, never a mix
    assert visible_devices([1, 3], [UUID_A, ""])["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert visible_devices([2], [])["CUDA_VISIBLE_DEVICES"] == "2"


def test_a_gpu_is_unfit_when_lost_or_waiting_for_a_reset():
    assert gpu_problem(GpuReading(UUID_A)) == ""
    assert gpu_problem(GpuReading(UUID_A, lost="GPU is lost")) == "unreachable: GPU is lost"
    assert "reset" in gpu_problem(GpuReading(UUID_A, remap_pending=True))
    assert "reset" in gpu_problem(GpuReading(UUID_A, retired_pages_pending=True))
    assert "failed" in gpu_problem(GpuReading(UUID_A, remap_failed=True, remap_pending=True))
