"""The scheduling policy: a pure function from a Snapshot to Decisions (no Django).

`decide` is the gpusched policy (gpusched.py); `POLICIES` names every policy the simulator
and the benchmarks can compare: "gpusched", "fifo" and the baselines.
"""

from collections.abc import Callable

from jobs.policy_build import check_build

check_build()  # a compiled policy (bin/build-policy) must have been built from these sources

from .baselines import multifactor_decide, priority_decide
from .fifo import decide as fifo_decide
from .gpusched import decide
from .types import (
    Allocation,
    Decisions,
    NodeView,
    PendingReason,
    PendingReasons,
    Placement,
    PolicyConfig,
    Preemption,
    QueuedJob,
    Reservation,
    RunningView,
    Snapshot,
    TierSpec,
)

POLICIES: dict[str, Callable[[Snapshot], Decisions]] = {
    "gpusched": decide,
    "fifo": fifo_decide,
    "priority": priority_decide,
    "multifactor": multifactor_decide,
}

__all__ = [
    "POLICIES", "Allocation", "Decisions", "NodeView", "PendingReason", "PendingReasons",
    "Placement", "PolicyConfig", "Preemption", "QueuedJob", "Reservation", "RunningView",
    "Snapshot", "TierSpec", "decide", "fifo_decide", "multifactor_decide", "priority_decide",
]
