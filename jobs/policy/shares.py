"""GPUs running per tier, org and project: what fair share and floors read in a round."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from .types import RunningView


@dataclass(slots=True)
class Shares:
    """GPUs running per tier, org and (org, project); updated as the round places jobs."""

    tier: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    org: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    project: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    @classmethod
    def of(cls, running: list[RunningView]) -> Shares:
        """What the running attempts hold (one pass; a fleet may run thousands)."""
        shares = cls()
        tiers, orgs, projects = shares.tier, shares.org, shares.project
        for run in running:
            allocs = run.allocations
            gpus = len(allocs[0].gpus) if len(allocs) == 1 else run.gpus
            tiers[run.tier] += gpus
            orgs[run.org] += gpus
            projects[run.org, run.project] += gpus
        return shares

    def add(self, tier: str, org: str, project: str, gpus: int) -> None:
        self.tier[tier] += gpus
        self.org[org] += gpus
        self.project[(org, project)] += gpus
