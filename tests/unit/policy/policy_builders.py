"""Small builders for policy tests: nodes, running attempts, queued jobs, snapshots."""

from __future__ import annotations

from jobs.policy.types import (
    Allocation,
    Decisions,
    NodeView,
    PolicyConfig,
    QueuedJob,
    RunningView,
    Snapshot,
    TierSpec,
)

NOW = 1_000_000.0


def tiers(**floors: float) -> dict[str, TierSpec]:
    """enterprise > paid > free; no floors unless given (e.g. free=0.25)."""
    return {
        "enterprise": TierSpec("enterprise", 3, 4.0, floors.get("enterprise", 0.0), 1.0, 30.0,
                               preemptible=False),
        "paid": TierSpec("paid", 2, 2.0, floors.get("paid", 0.0), 1.0, 300.0),
        "free": TierSpec("free", 1, 1.0, floors.get("free", 0.0), 1.0, 3600.0),
    }


def node(name: str, gpus: int = 8, free: tuple[int, ...] | None = None, gpu_type: str = "H100",
         island: str = "i0", region: str = "", mem: int = 81_920,
         schedulable: bool = True, until: float | None = None,
         back_at: float | None = None, owner: str = "", upcoming: str = "") -> NodeView:
    free = tuple(range(gpus)) if free is None else free
    return NodeView(name, gpu_type, mem, gpus, free, region, island, schedulable, until,
                    back_at, owner, upcoming)


def job(job_id: int, tier: str = "paid", org: str = "a", gpus: int = 1, wait: float = 0.0,
        limit: float = 3600.0, **kw) -> QueuedJob:
    return QueuedJob(job_id, org, tier, gpus, NOW - wait, limit, **kw)


def running(attempt_id: int, alloc: dict[str, tuple[int, ...]], tier: str = "free",
            org: str = "z", ran: float = 600.0, ends_in: float = 3600.0,
            **kw) -> RunningView:
    allocations = tuple(Allocation(n, g) for n, g in alloc.items())
    return RunningView(attempt_id, 1000 + attempt_id, org, tier, allocations, NOW - ran,
                       NOW + ends_in, NOW + ends_in + 600, **kw)


def snap(nodes: list[NodeView], run: list[RunningView] | None = None,
         queued: list[QueuedJob] | None = None, tier_specs: dict | None = None,
         config: PolicyConfig | None = None, **kw) -> Snapshot:
    return Snapshot(NOW, nodes, run or [], queued or [], tier_specs or tiers(),
                    config=config or PolicyConfig(), **kw)


def placed(d: Decisions) -> dict[int, tuple[Allocation, ...]]:
    return {p.job_id: p.allocations for p in d.placements}


def nodes_of(d: Decisions, job_id: int) -> list[str]:
    return [a.node for a in placed(d)[job_id]]
