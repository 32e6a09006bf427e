"""One tenant floods the queue: is another tenant of the same tier still served?

    python bench/heavy_tenant.py [--heavy-jobs 10000] [--levels org,project,user]

At each level of fair share, organizations in a tier, projects in an organization and users
in a project, a heavy tenant submits N jobs at once and a light tenant of the same tier
(paid) submits one job every 20 s. Fleet: 8 nodes x 8 GPUs; every job takes 1 GPU for
20 s to 3 min (lognormal, median 60 s, seeded; the limit is twice that, rounded up to a
minute); 30 min of virtual time, so the flood (N x about 60 GPU-seconds) outlasts the run.
Prints the light tenant's waits (a job still queued at the end counts its wait so far)
beside the heavy tenant's share of the GPU-time, for gpusched and the baselines, each in
the same simulator (docs/simulator.md). 15 to 30 s of wall time per run at N = 10,000.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.policy import POLICIES  # noqa: E402
from jobs.sim.engine import Simulator  # noqa: E402
from jobs.sim.metrics import pct  # noqa: E402
from jobs.sim.model import SimJob, build_fleet, default_tiers  # noqa: E402

# (org, project, user) of the heavy and the light tenant at each level
TENANTS = {
    "org": (("heavy-org", "", ""), ("light-org", "", "")),
    "project": (("acme", "batch", ""), ("acme", "interactive", "")),
    "user": (("acme", "app", "bulk"), ("acme", "app", "alice")),
}
MEDIAN_S, MAX_S = 60.0, 180.0


def workload(level: str, heavy_jobs: int, horizon: float, every: float,
             seed: int = 0) -> list[SimJob]:
    rng = random.Random(seed)
    heavy, light = TENANTS[level]
    jobs = [_job(rng, i, heavy, 0.0) for i in range(heavy_jobs)]
    t = every
    while t < horizon - 2 * MAX_S:
        jobs.append(_job(rng, len(jobs), light, t))
        t += every
    return jobs


def _job(rng: random.Random, i: int, who: tuple[str, str, str], at: float) -> SimJob:
    org, project, user = who
    duration = min(MAX_S, max(20.0, rng.lognormvariate(math.log(MEDIAN_S), 0.5)))
    limit = 60.0 * math.ceil(2 * duration / 60.0)
    return SimJob(i, org, "paid", 1, at, duration, limit, expected_duration=duration,
                  project=project, user=user)


def measure(level: str, policy: str, args: argparse.Namespace) -> dict[str, float]:
    jobs = workload(level, args.heavy_jobs, args.horizon, args.light_every)
    sim = Simulator(build_fleet(8, 8, None, 8), jobs, POLICIES[policy], default_tiers(),
                    period=10.0, max_time=args.horizon)
    t0 = time.perf_counter()
    res = sim.run()
    light_who = TENANTS[level][1]
    light = [j for j in res.jobs if (j.org, j.project, j.user) == light_who]
    waits = [(j.first_start if j.first_start is not None else args.horizon) - j.submit
             for j in light]
    light_ids = {j.job_id for j in light}
    heavy_s = sum(_ran(j, args.horizon) for j in res.jobs if j.job_id not in light_ids)
    total_s = heavy_s + sum(_ran(j, args.horizon) for j in light)
    return {"started": sum(j.first_start is not None for j in light), "light": len(light),
            "p50": pct(waits, 50), "p95": pct(waits, 95), "max": max(waits),
            "heavy_share": heavy_s / total_s if total_s else 0.0,
            "wall_s": time.perf_counter() - t0}


def _ran(job: SimJob, horizon: float) -> float:
    """GPU-seconds the job ran before the horizon (jobs here run once, on one GPU)."""
    if job.first_start is None:
        return 0.0
    return min(job.end if job.end is not None else horizon, horizon) - job.first_start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heavy-jobs", type=int, default=10_000)
    ap.add_argument("--horizon", type=float, default=1800.0)
    ap.add_argument("--light-every", type=float, default=20.0)
    ap.add_argument("--levels", default="org,project,user")
    ap.add_argument("--policies", default="gpusched,fifo,priority,multifactor")
    args = ap.parse_args()
    print(f"heavy tenant: {args.heavy_jobs} jobs at t=0; light tenant: one job every "
          f"{args.light_every:g} s; 64 GPUs, 1-GPU jobs of about {MEDIAN_S:g} s, "
          f"{args.horizon:g} s of virtual time")
    print(f"{'level':<8} {'policy':<12} {'light started':>13} {'wait p50':>9} {'p95':>8} "
          f"{'max':>8} {'heavy share':>11} {'wall s':>7}")
    for level in args.levels.split(","):
        for policy in args.policies.split(","):
            m = measure(level, policy, args)
            print(f"{level:<8} {policy:<12} {m['started']:>6}/{m['light']:<6} "
                  f"{m['p50']:>8.1f}s {m['p95']:>7.1f}s {m['max']:>7.1f}s "
                  f"{m['heavy_share']:>10.1%} {m['wall_s']:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
