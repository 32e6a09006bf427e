"""Replay of the Microsoft Philly trace (ATC'19; file as filtered in the Pollux OSDI'21 artifact).

Columns: timestamp (submit, UTC), duration (s), num_gpus, gpu_time (s), cluster (virtual
cluster = tenant). Any CSV with these columns works.

Mapping: each virtual cluster is one organization `vc-<id>`. Tiers by total GPU demand over the
whole file (rank 1 = largest): ranks 1-2 enterprise, 3-7 paid, the rest free. The trace has no
time limits; users ask for round limits above what they need, so a job's limit is the smallest
of 1 h, 4 h, 12 h, 1 d, 3 d, 7 d, 14 d, 30 d, 60 d that is at least its duration. There is no
duration estimate (the scheduler sees only the limit). Jobs larger than a node span nodes of one
island.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from datetime import UTC, datetime

from .model import SimJob

LIMITS = (3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400, 14 * 86400, 30 * 86400,
          60 * 86400)
TIER_BY_RANK = ("enterprise", "enterprise", "paid", "paid", "paid", "paid", "paid")


def _ts(s: str) -> float:
    return datetime.fromisoformat(s).replace(tzinfo=UTC).timestamp()


def tiers_by_demand(rows: list[dict]) -> dict[str, str]:
    demand: dict[str, float] = defaultdict(float)
    for r in rows:
        demand[r["cluster"]] += float(r["gpu_time"] or 0.0)
    ranked = sorted(demand, key=lambda c: (-demand[c], c))
    return {c: TIER_BY_RANK[i] if i < len(TIER_BY_RANK) else "free"
            for i, c in enumerate(ranked)}


def time_limit(duration: float) -> float:
    return float(next((lim for lim in LIMITS if lim >= duration), duration))


def load(path: str, start_day: float = 0.0, days: float | None = None,
         max_jobs: int | None = None) -> list[SimJob]:
    """Jobs submitted in [start_day, start_day + days) after the first submit; time 0 = window."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    tiers = tiers_by_demand(rows)
    t0 = min(_ts(r["timestamp"]) for r in rows) + start_day * 86400.0
    t1 = t0 + days * 86400.0 if days else float("inf")
    jobs: list[SimJob] = []
    for r in sorted(rows, key=lambda r: _ts(r["timestamp"])):
        at = _ts(r["timestamp"])
        if not t0 <= at < t1:
            continue
        dur = max(1.0, float(r["duration"]))
        org = f"vc-{r['cluster']}"
        jobs.append(SimJob(len(jobs) + 1, org, tiers[r["cluster"]], int(r["num_gpus"]),
                           at - t0, dur, time_limit(dur), project=org))
        if max_jobs and len(jobs) >= max_jobs:
            break
    return jobs
