"""What GPU time costs: a price per GPU-hour for each GPU type; unpriced types are free."""

from __future__ import annotations

import math
from collections.abc import Sequence

from credits.models import GpuPrice


def gpu_hour_price(gpu_type: str) -> int:
    return (GpuPrice.objects.filter(gpu_type=gpu_type)
            .values_list("credits_per_gpu_hour", flat=True).first() or 0)


def highest_price(gpu_types: Sequence[str]) -> int:
    """The dearest GPU a job that accepts `gpu_types` (any type, if empty) may land on."""
    prices = GpuPrice.objects.all()
    if gpu_types:
        prices = prices.filter(gpu_type__in=list(gpu_types))
    return max(prices.values_list("credits_per_gpu_hour", flat=True), default=0)


def cost(credits_per_hour: int, seconds: float) -> int:
    """Whole credits for `seconds` at `credits_per_hour`, a started credit counting whole."""
    return math.ceil(credits_per_hour * max(0.0, seconds) / 3600 - 1e-9)
