"""Whose jobs make a tier's wait tail: by gang size and by organization.

    python bench/tier_tail.py --of paid --load 1.5 --seed 0 [--policy gpusched] [--late 300]
    python bench/tier_tail.py --of paid --seed 3 --set reserve_share=0.25

Runs one policy on the text-to-video workload (the simulator's options: `--load`, `--seed`,
`--tier NAME:FIELD=VALUE`, `--set FIELD=VALUE`, ...) and prints, for the tier `--of` (paid),
the jobs that started later than `--late` seconds (default: the tier's start SLO) by gang size
and by organization, the organizations behind the tier's p95, each organization's x in the
Jain index, and the tier's p95 without the organization with the most late jobs. About
1.5 min a run at load 1.5.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.sim import cli  # noqa: E402
from jobs.sim.metrics import pct, summarize, wait  # noqa: E402
from jobs.sim.policies import resolve  # noqa: E402


def main() -> None:
    ap = cli.parser()
    ap.description = __doc__.splitlines()[0]
    ap.set_defaults(policy="gpusched", load=1.5)
    ap.add_argument("--of", default="paid",
                    help="the tier to look at (default paid)")
    ap.add_argument("--late", type=float, default=None,
                    help="seconds of wait that count as late (default: the tier's start SLO)")
    args = ap.parse_args()
    (name, policy), = resolve(args.policy.split(",")[0]).items()
    res = cli.simulate(args, policy)
    fig = summarize(res)
    jobs = [j for j in res.jobs if j.tier == args.of]
    late_s = args.late if args.late is not None else res.tiers[args.of].start_slo_s
    waits = {j.job_id: wait(j, res.end_time) for j in jobs}
    p95 = pct(sorted(waits.values()), 95)
    late = [j for j in jobs if waits[j.job_id] > late_s]
    tail = [j for j in jobs if waits[j.job_id] > p95]
    by_org = Counter(j.org for j in late)
    print(f"{name}, video load {args.load}, seed {args.seed}: tier {args.of}, {len(jobs)} jobs, "
          f"p95 wait {p95:.0f} s")
    sizes = Counter(j.gpus for j in jobs)
    late_sizes = Counter(j.gpus for j in late)
    print(f"later than {late_s:.0f} s: {len(late)} jobs; by GPUs: " + ", ".join(
        f"{g}: {late_sizes[g]} of {sizes[g]}" for g in sorted(sizes)))
    print(f"behind the p95: {len(tail)} jobs; by org: "
          + ", ".join(f"{o} {n}" for o, n in Counter(j.org for j in tail).most_common(3)))
    per_org = fig["per_org"]
    for org, n in by_org.most_common(5):
        row = per_org[org]
        share = row["jobs"] / len(jobs)
        x = _x(row)
        print(f"  {org}: {n} late of {row['jobs']} jobs ({share:.0%} of the tier's), "
              f"p95 {row['wait_p95']:.0f} s, x {x}")
    if by_org:
        top = by_org.most_common(1)[0][0]
        rest = sorted(waits[j.job_id] for j in jobs if j.org != top)
        print(f"tier p95 without {top}: {pct(rest, 95):.0f} s over {len(rest)} jobs")


def _x(org_row: dict) -> str:
    """The org's x in its tier's Jain index, and in the index over its own waits."""
    if "fair_ratio" not in org_row:
        return "- (not in the index)"
    waiting = org_row.get("fair_ratio_while_waiting")
    return f"{org_row['fair_ratio']:.2f}" + ("" if waiting is None
                                             else f" ({waiting:.2f} while it waits)")


if __name__ == "__main__":
    main()
