"""An ideal scheduler for one tier: the bound behind the simulator's figures.

The ideal has no nodes: the fleet is one pool of divisible GPUs, so no gang ever waits for a
node to drain. Higher tiers are served the moment they arrive and never wait, but never take
the tier's own floor; lower tiers hold their guaranteed floors (the least a policy must leave
them while they have work queued), or less while they have less work. The tier gets every
other GPU, and a job starts as soon as that many are idle; no running job of the tier is
stopped when a higher tier's arrivals shrink the pool. Every choice favours the tier, so its
waits show what the capacity the floors leave allows, not what a real scheduler reaches.
Three orders: `arrival` (oldest first, and any younger job that fits starts too),
`smallest` (smallest GPU-time first, with exact durations: an oracle no scheduler has) and
`fair` (organizations by gpusched's share, decayed GPU-seconds plus running GPUs times tau,
lowest first, oldest first inside one: what fair share costs the tier's waits on its own).
`bench/ideal_bound.py` prints it for the text-to-video workload.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict

from jobs.policy.types import PolicyConfig

from .model import SimJob

ORDERS = ("arrival", "smallest", "fair")
_TAU = PolicyConfig().usage_half_life_s / math.log(2)  # ranking.py's tau
_INF = float("inf")


def ideal_waits(jobs: list[SimJob], tier: str, gpus: int, floors: dict[str, float],
                priority: dict[str, int], order: str) -> list[float]:
    """Start waits of `tier`'s jobs in the ideal pool (module docstring), in start order."""
    own = sorted((j for j in jobs if j.tier == tier), key=lambda j: j.submit)
    events = _other_tiers(jobs, tier)
    demand = dict.fromkeys(priority, 0)
    ends: list[tuple[float, int, str]] = []  # the tier's running jobs: (end, GPUs, org)
    queue: list[SimJob] = []
    waits: list[float] = []
    usage: dict[str, float] = defaultdict(float)  # decayed GPU-seconds per org
    running: dict[str, int] = defaultdict(int)
    used = i = e = 0
    last = own[0].submit if own else 0.0
    while i < len(own) or queue:
        # the next instant something changes: an arrival, another tier's event, an end
        t = min(own[i].submit if i < len(own) else _INF,
                events[e][0] if e < len(events) else _INF, ends[0][0] if ends else _INF)
        if order == "fair":
            _decay(usage, running, t - last)
        last = t
        while e < len(events) and events[e][0] <= t:
            demand[events[e][2]] += events[e][1]
            e += 1
        while ends and ends[0][0] <= t:
            _, k, org = heapq.heappop(ends)
            used -= k
            running[org] -= k
        while i < len(own) and own[i].submit <= t:
            queue.append(own[i])
            i += 1
        free = _pool(gpus, floors, priority, tier, demand) - used
        waiting = []
        for job in _ordered(queue, order, usage, running):
            if job.gpus <= free:
                free -= job.gpus
                used += job.gpus
                running[job.org] += job.gpus
                heapq.heappush(ends, (t + job.duration, job.gpus, job.org))
                waits.append(t - job.submit)
            else:
                waiting.append(job)
        queue = sorted(waiting, key=lambda j: j.submit)
    return waits


def _ordered(queue: list[SimJob], order: str, usage: dict[str, float],
             running: dict[str, int]) -> list[SimJob]:
    """The queue (oldest first) in the order the ideal serves it."""
    if order == "smallest":
        return sorted(queue, key=lambda j: j.gpus * j.duration)
    if order != "fair":
        return queue
    # like gpusched's ranking: an org's share rises with every job it starts
    share = {j.org: usage[j.org] + running[j.org] * _TAU for j in queue}
    by_org: dict[str, list[SimJob]] = defaultdict(list)
    for job in queue:
        by_org[job.org].append(job)
    heap = [(share[org], org) for org in by_org]
    heapq.heapify(heap)
    out = []
    while heap:
        _, org = heapq.heappop(heap)
        job = by_org[org].pop(0)
        out.append(job)
        if by_org[org]:
            share[org] += job.gpus * _TAU
            heapq.heappush(heap, (share[org], org))
    return out


def _decay(usage: dict[str, float], running: dict[str, int], dt: float) -> None:
    """Decayed GPU-seconds after dt more seconds of the orgs' running GPUs."""
    if dt <= 0:
        return
    keep = math.exp(-dt / _TAU)
    for org in set(usage) | set(running):
        # exact for a constant rate: u' = u e^(-dt/tau) + r tau (1 - e^(-dt/tau))
        usage[org] = usage[org] * keep + running[org] * _TAU * (1 - keep)


def _other_tiers(jobs: list[SimJob], tier: str) -> list[tuple[float, int, str]]:
    """Every other tier as if served on arrival: (time, +/-GPUs, tier), ends first."""
    events = []
    for job in jobs:
        if job.tier != tier:
            events.append((job.submit, job.gpus, job.tier))
            events.append((job.submit + job.duration, -job.gpus, job.tier))
    events.sort(key=lambda ev: (ev[0], ev[1]))
    return events


def _pool(gpus: int, floors: dict[str, float], priority: dict[str, int], tier: str,
          demand: dict[str, int]) -> int:
    """GPUs the tier may use now: lower tiers keep their floor only while they have that
    much work; the others (higher, or of equal priority) take the rest but never the tier's
    own floor."""
    mine = priority[tier]
    below = sum(min(int(floors[n] * gpus), d) for n, d in demand.items() if priority[n] < mine)
    above = sum(d for n, d in demand.items() if priority[n] >= mine and n != tier)
    return gpus - below - min(above, gpus - below - int(floors[tier] * gpus))
