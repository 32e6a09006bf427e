"""The acceptance figures of the text-to-video workload over several seeds, one row a seed.

    python bench/seeds.py --seeds 0-6 --load 1.5 [--policy gpusched] [--workers 2]
    python bench/seeds.py --seeds 0-2 --load 3 --set usage_half_life_s=3600

Runs the simulator (its options: `--load`, `--tier NAME:FIELD=VALUE`, `--set FIELD=VALUE`,
`--checkpoint-interval`, ...) once a seed, `--workers` seeds at a time in their own
processes, and prints per policy a table of the figures the acceptance names: enterprise and
paid p95 wait, free's max wait and GPU share, utilization while jobs wait, GPU-hours lost to
preemption, and Jain across organizations per tier (over the periods the tier contends).
A figure that misses its target is marked `*`; the last rows give each figure's mean and the
seeds that meet it; `--json OUT` keeps every run's figures. A seed is one hour of arrivals:
a figure close to its target moves with the seed and with any change of order, so a change
is judged over several. Times: bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from copy import copy
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.sim import cli  # noqa: E402

Figure = Callable[[dict], float | None]


def _tier(name: str, key: str) -> Figure:
    return lambda r: r["per_tier"].get(name, {}).get(key)


def _jain(name: str) -> Figure:
    return lambda r: r["jain_by_tier"].get(name)


@dataclass(frozen=True)
class Column:
    name: str
    figure: Figure
    unit: float  # the figure divided by this is what the column shows
    digits: int
    # met or not; None: no target (at this load, or reported only)
    target: Callable[[float, argparse.Namespace], bool | None] = lambda v, a: None


COLUMNS = [
    Column("ent p95 s", _tier("enterprise", "wait_p95"), 1, 1, lambda v, a: v <= 30),
    Column("paid p95 min", _tier("paid", "wait_p95"), 60, 1,
           lambda v, a: None if a.load > 1.5 else v <= 5),  # a target up to load 1.5
    Column("free max min", _tier("free", "wait_max"), 60, 1),
    Column("free share %", _tier("free", "gpu_share"), 0.01, 1,
           lambda v, a: v / 100 >= cli.tiers_for(a)["free"].guaranteed_share - 1e-9),
    Column("util %", lambda r: r["utilization"], 0.01, 2, lambda v, a: v >= 97),
    Column("loss %", lambda r: r["preempted_fraction"], 0.01, 2, lambda v, a: v <= 2),
    Column("Jain ent", _jain("enterprise"), 1, 3, lambda v, a: v >= 0.95),
    Column("Jain paid", _jain("paid"), 1, 3, lambda v, a: v >= 0.95),
    Column("Jain free", _jain("free"), 1, 3, lambda v, a: v >= 0.95),
]


def _seeds(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out


def _one(args: argparse.Namespace, seed: int) -> dict[str, dict]:
    args = copy(args)
    args.seed, args.quiet = seed, True
    return cli.run(args)


def _cells(result: dict, args: argparse.Namespace) -> list[tuple[float | None, bool | None]]:
    """(value in the column's unit, meets its target or None) per column; the value is None
    where a run has no such figure (a tier without jobs or without organizations waiting)."""
    out: list[tuple[float | None, bool | None]] = []
    for col in COLUMNS:
        raw = col.figure(result)
        value = None if raw is None or math.isnan(raw) else raw / col.unit
        out.append((value, None if value is None else col.target(value, args)))
    return out


def table(policy: str, rows: dict[int, dict], args: argparse.Namespace) -> str:
    """Markdown: a row a seed, then the mean and how many seeds meet each target."""
    lines = [f"### {policy}, video, {args.nodes} x {args.gpus_per_node} GPUs, load {args.load}",
             "", "| seed | " + " | ".join(c.name for c in COLUMNS) + " |",
             "| ---: |" + " ---: |" * len(COLUMNS)]
    cells = [_cells(result, args) for _, result in sorted(rows.items())]

    def line(label: str, texts: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(texts) + " |")

    for seed, row in zip(sorted(rows), cells, strict=True):
        line(str(seed), ["n/a" if v is None else f"{v:.{c.digits}f}" + ("*" if ok is False else "")
                         for c, (v, ok) in zip(COLUMNS, row, strict=True)])
    means, met = [], []
    for i, col in enumerate(COLUMNS):
        values = [row[i][0] for row in cells if row[i][0] is not None]
        means.append(f"{statistics.fmean(values):.{col.digits}f}" if values else "n/a")
        judged = [row[i][1] for row in cells if row[i][1] is not None]
        met.append(f"{sum(judged)}/{len(judged)}" if judged else "-")
    line("mean", means)
    line("met", met)
    return "\n".join(lines)


def main() -> None:
    ap = cli.parser()
    ap.description = __doc__.splitlines()[0]
    ap.set_defaults(policy="gpusched", load=1.5)
    ap.add_argument("--seeds", default="0-6", help="e.g. 0-6 or 0,3,5 (default 0-6)")
    ap.add_argument("--workers", type=int, default=2, help="seeds run at once (default 2)")
    args = ap.parse_args()
    if args.trace != "video":
        ap.error("bench/seeds.py runs the video workload; replay a trace with python -m jobs.sim")
    cli.refuse_bad_overrides(ap, args)
    seeds = _seeds(args.seeds)
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        runs = dict(zip(seeds, pool.map(_one, [args] * len(seeds), seeds), strict=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "runs": runs}, f, indent=1, default=str)
    for policy in next(iter(runs.values())):
        print(table(policy, {s: r[policy] for s, r in runs.items()}, args))
        print()


if __name__ == "__main__":
    main()
