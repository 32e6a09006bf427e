"""Fair split of a tier's GPUs among its organizations (what Jain is measured against)."""

from __future__ import annotations


def water_fill(capacity: float, demand: dict[str, int],
               weights: dict[str, float]) -> dict[str, float]:
    """Weighted max-min fair split of `capacity` GPUs among orgs with these demands."""
    out: dict[str, float] = {}
    left = float(capacity)
    todo = sorted(demand, key=lambda o: demand[o] / weights.get(o, 1.0))
    wsum = sum(weights.get(o, 1.0) for o in todo)
    for org in todo:
        w = weights.get(org, 1.0)
        give = min(float(demand[org]), left * w / wsum) if wsum > 0 else 0.0
        out[org] = give
        left -= give
        wsum -= w
    return out
