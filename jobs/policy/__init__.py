"""The scheduling policy: a pure function from a Snapshot to Decisions (no Django)."""

from collections.abc import Callable

from .fifo import decide as fifo_decide
from .types import (
    Allocation,
    Decisions,
    NodeView,
    PendingReason,
    Placement,
    PolicyConfig,
    Preemption,
    QueuedJob,
    Reservation,
    RunningView,
    Snapshot,
    TierSpec,
)

decide = fifo_decide
POLICIES: dict[str, Callable[[Snapshot], Decisions]] = {"fifo": fifo_decide}

__all__ = [
    "POLICIES", "Allocation", "Decisions", "NodeView", "PendingReason", "Placement",
    "PolicyConfig", "Preemption", "QueuedJob", "Reservation", "RunningView", "Snapshot",
    "TierSpec", "decide", "fifo_decide",
]
