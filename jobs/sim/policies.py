"""Policies by name, from `jobs.policy.POLICIES` (gpusched, fifo and the baselines)."""

from __future__ import annotations

from collections.abc import Callable

from jobs.policy import POLICIES

ORDER = ("gpusched", "fifo", "priority", "multifactor")


def resolve(name: str) -> dict[str, Callable]:
    """`all` gives every known policy in ORDER; otherwise a comma-separated list of names."""
    names = [n for n in ORDER if n in POLICIES] if name == "all" else name.split(",")
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise SystemExit(f"unknown policy {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(POLICIES))}")
    return {n: POLICIES[n] for n in names}
