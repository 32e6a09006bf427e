"""`manage.py gpu_node` refuses what it cannot run before it starts a worker."""

import importlib.util

import pytest
from django.core.management import CommandError, call_command


def test_a_configured_node_needs_a_gpu_count():
    for argv in (["--name", "n1"], ["--name", "n1", "--gpus", "0"]):
        with pytest.raises(CommandError, match="--gpus N"):
            call_command("gpu_node", *argv)


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None,
                    reason="this host may have NVML: tests/gpu covers it")
def test_nvml_asked_for_where_there_is_none_is_refused():
    with pytest.raises(CommandError, match="NVML found no GPU"):
        call_command("gpu_node", "--name", "n1", "--nvml")
