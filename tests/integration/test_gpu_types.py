"""`GET /api/v1/gpu-types` lists what a request may name: each GPU type of the fleet, its
GPUs in all and on nodes taking work now, the most on one node, memory, regions and price."""

import pytest

from credits.models import GpuPrice
from tests.support.factories import make_node
from workers.models import Node, NodeState

pytestmark = pytest.mark.django_db


def test_each_type_with_its_gpus_memory_regions_and_price(api):
    make_node("h1", gpus=8, gpu_type="H100")
    make_node("h2", gpus=4, gpu_type="H100")
    make_node("a1", gpus=2, gpu_type="A100")
    make_node("gone", gpus=8, gpu_type="L4")
    Node.objects.filter(name="h2").update(state=NodeState.CORDONED, region="eu")
    Node.objects.filter(name="h1").update(region="us")
    Node.objects.filter(name="gone").update(state=NodeState.DOWN)
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3_600)
    GpuPrice.objects.create(gpu_type="B200", credits_per_gpu_hour=9_000)
    types = {t["gpu_type"]: t for t in api.get("/api/v1/gpu-types").json()["results"]}
    assert set(types) == {"A100", "B200", "H100"}  # a down node's type is not on offer
    assert types["H100"] == {"gpu_type": "H100", "gpus": 12, "schedulable_gpus": 8,
                             "dedicated_gpus": 0, "most_on_one_node": 8, "gpu_memory_mb": 81_920,
                             "regions": ["eu", "us"], "credits_per_gpu_hour": 3_600}
    assert types["A100"]["credits_per_gpu_hour"] is None  # free
    assert (types["B200"]["gpus"], types["B200"]["regions"]) == (0, [])  # priced, none yet
