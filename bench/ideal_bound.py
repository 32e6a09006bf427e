"""What an ideal scheduler could give one tier of the text-to-video workload.

    python bench/ideal_bound.py --tier paid --load 1.5 [--seeds 0,1,2,3,4] [--floor free=0.1]
    python bench/ideal_bound.py --tier enterprise --load 3 [--floor paid=0 --floor free=0.1]

One pool of divisible GPUs, higher tiers served on arrival, lower tiers at their floors
(`jobs/sim/ideal.py` says exactly how, and why every choice favours the tier). Prints the
tier's waits per seed in arrival order, smallest-first and fair-share order; the gap to the
simulator's figures is what nodes and gangs cost.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.sim import workload_video  # noqa: E402
from jobs.sim.ideal import ORDERS, ideal_waits  # noqa: E402
from jobs.sim.metrics import pct  # noqa: E402
from jobs.sim.model import default_tiers  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tier", default="paid")
    ap.add_argument("--load", type=float, default=1.5)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--gpus", type=int, default=512, help="the fleet's GPUs (64 x 8)")
    ap.add_argument("--horizon", type=float, default=3600.0)
    ap.add_argument("--floor", action="append", default=[], metavar="TIER=SHARE",
                    help="a tier's floor instead of the default (e.g. free's measured share)")
    args = ap.parse_args()
    tiers = default_tiers()
    floors = {n: t.guaranteed_share for n, t in tiers.items()}
    for item in args.floor:
        name, _, share = item.partition("=")
        if name not in floors:
            ap.error(f"--floor {item}: no tier {name!r}")
        floors[name] = float(share)
    priority = {n: t.priority for n, t in tiers.items()}
    print(f"ideal pool of {args.gpus} GPUs, tier {args.tier}, load {args.load}, floors "
          + ", ".join(f"{n} {f:.0%}" for n, f in floors.items()))
    print(f"{'seed':>4} {'order':>9} {'p50 s':>7} {'p95 s':>7} {'max s':>7}")
    for seed in (int(s) for s in args.seeds.split(",")):
        jobs = workload_video.generate(args.gpus, args.load, args.horizon, seed)
        for order in ORDERS:
            w = ideal_waits(jobs, args.tier, args.gpus, floors, priority, order)
            print(f"{seed:>4} {order:>9} {pct(w, 50):>7.0f} {pct(w, 95):>7.0f} "
                  f"{max(w, default=0.0):>7.0f}")


if __name__ == "__main__":
    main()
