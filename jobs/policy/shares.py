"""GPUs running per tier, org, project and user: what fair share, floors and caps read in a
round."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from .types import RunningView


class Owned(Protocol):
    """Whose GPUs they are: a queued job or a running attempt."""

    @property
    def tier(self) -> str: ...
    @property
    def org(self) -> str: ...
    @property
    def project(self) -> str: ...
    @property
    def user(self) -> str: ...


@dataclass(slots=True)
class Shares:
    """GPUs running per tier, org, (org, project), (org, project, user) and (org, user);
    updated as the round places and preempts."""

    tier: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    org: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    project: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    user: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    # (org, user): a member's GPUs over all the org's projects, what its cap bounds
    member: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    @classmethod
    def of(cls, running: list[RunningView]) -> Shares:
        """What the running attempts hold (one pass; a fleet may run thousands)."""
        shares = cls()
        tiers, orgs, projects, users = shares.tier, shares.org, shares.project, shares.user
        members = shares.member
        for run in running:
            allocs = run.allocations
            gpus = len(allocs[0].gpus) if len(allocs) == 1 else run.gpus
            tiers[run.tier] += gpus
            orgs[run.org] += gpus
            projects[run.org, run.project] += gpus
            users[run.org, run.project, run.user] += gpus
            members[run.org, run.user] += gpus
        return shares

    def add(self, owner: Owned, gpus: int) -> None:
        """Count `gpus` more (or fewer, when negative) for the owner's tier, org, project, user."""
        self.tier[owner.tier] += gpus
        self.org[owner.org] += gpus
        self.project[owner.org, owner.project] += gpus
        self.user[owner.org, owner.project, owner.user] += gpus
        self.member[owner.org, owner.user] += gpus
