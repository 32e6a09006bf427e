"""The change that takes a what-if is read back from the policy's own words for it, whatever
the GPU type is called."""

import pytest

from jobs.policy.explain import FEWER_GPUS, FEWER_GPUS_SOONER, OTHER_TYPE, OTHER_TYPE_SOONER
from jobs.services.relaxations import relaxation


@pytest.mark.parametrize("gpu_type", ["A100", "H100 SXM 80GB", "gb200.(nvl)", "type with GPUs"])
def test_another_type_adds_it_to_the_types_the_job_accepts(gpu_type: str) -> None:
    text = OTHER_TYPE.format(gpu_type=gpu_type)
    assert relaxation(text, ["H100"]) == {"gpu_types": ["H100", gpu_type]}


def test_fewer_gpus_is_the_count_that_would_start_it() -> None:
    assert relaxation(FEWER_GPUS.format(gpus=3, min_gpus=2), []) == {"gpus": 3}


START = "14:05 UTC (in 12 min)"


@pytest.mark.parametrize("gpu_type", ["A100", "H100 SXM 80GB", "MI300X (on loan)"])
def test_a_sooner_start_reads_back_the_same_change(gpu_type: str) -> None:
    text = OTHER_TYPE_SOONER.format(start=START, gpu_type=gpu_type)
    assert relaxation(text, ["H100"]) == {"gpu_types": ["H100", gpu_type]}
    text = FEWER_GPUS_SOONER.format(start=START, gpus=4, min_gpus=2)
    assert relaxation(text, []) == {"gpus": 4}


@pytest.mark.parametrize("text", ["", "would start now on", "something else entirely",
                                  OTHER_TYPE.format(gpu_type="A100") + " later"])
def test_no_what_if_is_no_change(text: str) -> None:
    assert relaxation(text, ["H100"]) is None
