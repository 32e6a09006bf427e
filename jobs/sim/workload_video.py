"""Seedable synthetic text-to-video workload.

Three tiers offer, at load 1.0, `shares` of the fleet's GPU-time (enterprise 20%, paid 40%,
free 40% by default); `load` scales all of them. Each tier has many organizations whose sizes
follow a Zipf law (exponent 1.1). Jobs arrive in batches (compound Poisson per tier): most
batches are 1-3 jobs, one in ten is a campaign of 10-40 jobs from one org in a few seconds.
A job asks for 1, 2, 4 or 8 GPUs (35/30/20/15%) and runs 20 s to 10 min: lognormal (median
90 s, sigma 0.9) truncated to [20, 600] s, so the tail is heavy but bounded. The user's
estimate is the true duration times a lognormal error (sigma 0.2); the time limit is the larger
of 1.5x the duration and 2x the estimate, rounded up to a minute.
"""

from __future__ import annotations

import math
import random

from .model import SimJob

SHARES = {"enterprise": 0.2, "paid": 0.4, "free": 0.4}
ORGS = {"enterprise": 8, "paid": 32, "free": 128}
GPU_CHOICES = (1, 2, 4, 8)
GPU_WEIGHTS = (0.35, 0.30, 0.20, 0.15)
DUR_MIN, DUR_MAX, DUR_MEDIAN, DUR_SIGMA = 20.0, 600.0, 90.0, 0.9
ZIPF_S = 1.1


def _duration(rng: random.Random) -> float:
    while True:
        d = DUR_MEDIAN * math.exp(rng.gauss(0.0, DUR_SIGMA))
        if DUR_MIN <= d <= DUR_MAX:
            return d


def _batch(rng: random.Random) -> int:
    if rng.random() < 0.1:
        return rng.randint(10, 40)
    return 1 + min(int(rng.expovariate(1.0)), 10)


def mean_job_gpu_seconds(samples: int = 200_000) -> float:
    rng = random.Random(12345)
    return sum(rng.choices(GPU_CHOICES, GPU_WEIGHTS)[0] * _duration(rng)
               for _ in range(samples)) / samples


def mean_batch(samples: int = 200_000) -> float:
    rng = random.Random(54321)
    return sum(_batch(rng) for _ in range(samples)) / samples


_CAL: dict[str, float] = {}


def generate(capacity_gpus: int, load: float = 1.0, horizon_s: float = 7200.0, seed: int = 0,
             shares: dict[str, float] | None = None,
             orgs: dict[str, int] | None = None) -> list[SimJob]:
    """Jobs submitted over [0, horizon_s) offering `load` x capacity of GPU-time in total."""
    if not _CAL:
        _CAL["job"], _CAL["batch"] = mean_job_gpu_seconds(), mean_batch()
    rng = random.Random(seed)
    shares = shares or SHARES
    orgs = orgs or ORGS
    raw: list[tuple[float, str, str, int, float]] = []
    for tier, share in shares.items():
        n = orgs[tier]
        names = [f"{tier[:4]}-{i:03d}" for i in range(n)]
        zipf = [1.0 / (i + 1) ** ZIPF_S for i in range(n)]
        rate = load * share * capacity_gpus / (_CAL["job"] * _CAL["batch"])  # batches per s
        t = rng.expovariate(rate) if rate > 0 else horizon_s
        while t < horizon_s:
            org = rng.choices(names, zipf)[0]
            for _ in range(_batch(rng)):
                at = min(horizon_s - 1e-3, t + rng.uniform(0.0, 5.0))
                raw.append((at, tier, org, rng.choices(GPU_CHOICES, GPU_WEIGHTS)[0],
                            _duration(rng)))
            t += rng.expovariate(rate)
    raw.sort()
    jobs = []
    for i, (at, tier, org, gpus, dur) in enumerate(raw):
        est = dur * math.exp(rng.gauss(0.0, 0.2))
        limit = 60.0 * math.ceil(max(1.5 * dur, 2.0 * est, 60.0) / 60.0)
        jobs.append(SimJob(i + 1, org, tier, gpus, at, dur, limit, expected_duration=est,
                           project=f"{org}/p{rng.randint(0, 3)}"))
    return jobs


def with_alike_projects(jobs: list[SimJob], spread: float, seed: int) -> None:
    """Make each project's runs alike: scattered by `spread` (sigma of their log) around a
    typical run of the project's own, the typical runs scattered so that all runs together
    keep the workload's sigma (DUR_SIGMA), truncated as before. Estimates and limits follow
    the new runs as `generate` makes them. What learned run times can use; `generate`'s
    runs carry no trace of their project."""
    rng = random.Random(f"alike-{seed}")
    between = math.sqrt(max(DUR_SIGMA ** 2 - spread ** 2, 0.0))
    typical: dict[str, float] = {}
    for job in jobs:
        if job.project not in typical:
            typical[job.project] = DUR_MEDIAN * math.exp(rng.gauss(0.0, between))
        job.duration = _near(typical[job.project], spread, rng)
        est = job.duration * math.exp(rng.gauss(0.0, 0.2))
        job.expected_duration = est
        job.time_limit = 60.0 * math.ceil(max(1.5 * job.duration, 2.0 * est, 60.0) / 60.0)


def _near(typical: float, spread: float, rng: random.Random) -> float:
    for _ in range(100):
        d = typical * math.exp(rng.gauss(0.0, spread))
        if DUR_MIN <= d <= DUR_MAX:
            return d
    return min(max(typical, DUR_MIN), DUR_MAX)  # a typical run far out of bounds
