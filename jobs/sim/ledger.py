"""What the simulator counts while time passes: busy GPUs, backlogs, decayed usage, shares.

The engine reports every change of who runs or waits; the ledger integrates the figures
that `metrics.py` turns into the report.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from .fairness import water_fill
from .model import SimJob

STAT_KEYS = ("busy_time", "cap_time", "wait_window", "busy_wait", "cap_wait", "preemptions",
             "preempt_lost", "failure_lost", "node_failures", "rounds", "invalid_placements",
             "missing_reasons", "nonpreemptible_victims", "stalled", "crashes", "retries",
             "dead", "maintenance_lost", "maintenance_stopped", "maintenance_idle")


def _count(table: dict, key: Hashable, delta: int) -> None:
    v = table.get(key, 0) + delta
    if v:
        table[key] = v
    else:
        table.pop(key, None)


def _acc(table: dict[str, dict[str, float]], key: str) -> dict[str, float]:
    row = table.get(key)
    if row is None:
        row = table[key] = {"gpu_time": 0.0, "gpu_wait": 0.0, "backlog_time": 0.0,
                            "backlog_gpu": 0.0, "backlog_cap": 0.0, "fair_gpu": 0.0,
                            "contended_gpu": 0.0, "contended_fair": 0.0}
    return row


class DecayedUsage:
    """GPU-seconds per key (an org, a project, a user in a project), decayed with the
    policy's half-life: what the service's usage accounts hold (jobs/scheduler/usage.py)."""

    def __init__(self, half_life_s: float) -> None:
        self.running: dict[Hashable, int] = {}  # key -> GPUs running now
        self._value: dict[Hashable, list[float]] = {}  # key -> [decayed GPU-s, at time]
        self._k = math.log(2) / half_life_s

    def at(self, key: Hashable, t: float) -> float:
        """The key's decayed GPU-seconds at time t (usage accrues while GPUs run)."""
        u = self._value.setdefault(key, [0.0, t])
        dt = t - u[1]
        if dt > 0:
            e = math.exp(-self._k * dt)
            u[0] = u[0] * e + self.running.get(key, 0) * (1.0 - e) / self._k
            u[1] = t
        return u[0]

    def add(self, key: Hashable, gpus: int, t: float) -> None:
        self.at(key, t)  # settle what accrued at the old count first
        _count(self.running, key, gpus)

    def all_at(self, t: float) -> dict[Hashable, float]:
        return {key: self.at(key, t) for key in list(self._value)}


class Ledger:
    def __init__(self, healthy: int, window_end: float, org_weights: dict[str, float],
                 usage_half_life_s: float) -> None:
        self.healthy = healthy  # GPUs on nodes that are up
        self.window_end = window_end  # windowed figures stop at the last arrival
        self.org_weights = org_weights
        self.busy = 0
        self.org_usage = DecayedUsage(usage_half_life_s)  # its running counts: org_run
        self.org_run: dict[str, int] = self.org_usage.running
        self.project_usage = DecayedUsage(usage_half_life_s)  # key (org, project)
        self.user_usage = DecayedUsage(usage_half_life_s)  # key (org, project, user)
        self.tier_run: dict[str, int] = {}
        self.wait_org: dict[str, int] = {}
        self.wait_tier: dict[str, int] = {}
        self.demand: dict[str, dict[str, int]] = {}  # tier -> org -> GPUs running + waiting
        self.stats: dict[str, float] = dict.fromkeys(STAT_KEYS, 0.0)
        self.tier_acc: dict[str, dict[str, float]] = {}
        self.org_acc: dict[str, dict[str, float]] = {}

    def advance(self, now: float, t: float) -> None:
        """Integrate every figure over [now, t)."""
        dt = t - now
        if dt <= 0:
            return
        s, busy, cap = self.stats, self.busy, self.healthy
        s["busy_time"] += dt * busy
        s["cap_time"] += dt * cap
        for tier, g in self.tier_run.items():
            _acc(self.tier_acc, tier)["gpu_time"] += dt * g
        # windowed figures: only up to the last arrival (the overload, not the drain)
        dt = min(t, self.window_end) - now
        if dt > 0 and self.wait_tier:
            s["wait_window"] += dt
            s["busy_wait"] += dt * busy
            s["cap_wait"] += dt * cap
            self._advance_backlogs(dt, cap)

    def _advance_backlogs(self, dt: float, cap: int) -> None:
        for tier, g in self.tier_run.items():
            _acc(self.tier_acc, tier)["gpu_wait"] += dt * g
        for tier in self.wait_tier:
            row = _acc(self.tier_acc, tier)
            row["backlog_time"] += dt
            row["backlog_gpu"] += dt * self.tier_run.get(tier, 0)
            row["backlog_cap"] += dt * cap
        for org in self.wait_org:
            row = _acc(self.org_acc, org)
            row["backlog_time"] += dt
            row["backlog_gpu"] += dt * self.org_run.get(org, 0)
        # What each org of a contended tier holds against its fair split: over every period
        # its tier has jobs waiting, and over those the org itself has jobs waiting (the
        # narrower index, where an org whose one gang waits holds nothing).
        for tier in self.wait_tier:
            demand = self.demand.get(tier, {})
            fair = water_fill(self.tier_run.get(tier, 0), demand, self.org_weights)
            for org in demand:
                row = _acc(self.org_acc, org)
                share = dt * fair.get(org, 0.0)
                row["contended_gpu"] += dt * self.org_run.get(org, 0)
                row["contended_fair"] += share
                if org in self.wait_org:
                    row["fair_gpu"] += share

    def running_delta(self, job: SimJob, delta: int, now: float) -> None:
        self.org_usage.add(job.org, delta, now)
        self.project_usage.add((job.org, job.project), delta, now)
        self.user_usage.add((job.org, job.project, job.user), delta, now)
        _count(self.demand.setdefault(job.tier, {}), job.org, delta)
        _count(self.tier_run, job.tier, delta)
        self.busy += delta

    def waiting_delta(self, job: SimJob, delta: int) -> None:
        _count(self.demand.setdefault(job.tier, {}), job.org, delta * job.gpus)
        _count(self.wait_org, job.org, delta)
        _count(self.wait_tier, job.tier, delta)
