"""What a maintenance window saves over a drain, and over no notice, on the Philly week.

    python bench/maintenance.py [--maintenance-nodes 8] [--maintenance-at 259200] \
        [--maintenance-notice 86400] [--maintenance-for 14400] [--policy gpusched] [--workers 2]

Replays the simulator's workload (the Philly week on 64 x 8 GPUs by default, the acceptance
replay, `--max-time 864000`) three times, the same nodes (the first `--maintenance-nodes`:
whole islands) going down at the same hour, once per thing operators may do with the notice
(docs/nodes.md, "Maintenance windows"): set the service's window ("window"), drain the nodes
("drain", what they do without one: nothing new starts there), or nothing ("none"; the
nodes go down with what runs there). Prints per mode the GPU-hours the nodes sat free
between the notice and the hour, the tries stopped at the hour (a window's are evacuated
and wait again; the others' are lost, as in a failure) and the GPU-hours they lose,
and the run's mean wait, utilization while jobs wait, GPU-hours lost to preemption and jobs
finished by its end; and the ratio of window's to drain's idle plus lost GPU-hours, from the
same run.
"""

from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor
from copy import copy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jobs.sim import cli  # noqa: E402

MODES = ("window", "drain", "none")
PHILLY = ROOT.parent / "shared" / "traces" / "philly_sep_oct_2017.csv"


def _one(args, mode: str) -> dict:
    args = copy(args)
    args.maintenance_mode, args.quiet = mode, True
    return cli.run(args)[args.policy]


def _wasted(r: dict) -> float:
    return r["maintenance_idle_gpu_hours"] + r["maintenance_lost_gpu_hours"]


def main() -> None:
    ap = cli.parser()
    ap.description = __doc__.splitlines()[0]
    ap.set_defaults(trace=str(PHILLY), policy="gpusched", max_time=864000.0,
                    maintenance_nodes=8, maintenance_at=3 * 86400.0)
    ap.add_argument("--workers", type=int, default=2, help="modes run at once (default 2)")
    args = ap.parse_args()
    cli.refuse_bad_overrides(ap, args)
    if "," in args.policy or args.policy == "all":
        ap.error("one policy a run: the modes are what is compared")
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        runs = dict(zip(MODES, pool.map(_one, [args] * len(MODES), MODES), strict=True))
    gpus = args.maintenance_nodes * args.gpus_per_node
    print(f"{args.policy}: {gpus} GPUs ({args.maintenance_nodes} nodes) down at "
          f"{args.maintenance_at / 3600:g} h for {args.maintenance_for / 3600:g} h, known "
          f"{args.maintenance_notice / 3600:g} h ahead; {Path(args.trace).name}")
    print("| mode | GPU-h idle from notice | tries stopped | GPU-h lost | idle + lost "
          "| mean wait min | util while waiting % | GPU-h preempted | finished |")
    print("| --- |" + " ---: |" * 8)
    for mode, r in runs.items():
        print(f"| {mode} | {r['maintenance_idle_gpu_hours']:.1f} | {r['maintenance_stopped']} "
              f"| {r['maintenance_lost_gpu_hours']:.1f} | {_wasted(r):.1f} "
              f"| {r['wait_mean'] / 60:.1f} | {100 * r['utilization']:.2f} "
              f"| {r['preempted_gpu_hours']:.1f} | {r['finished']} of {r['jobs']} |")
    drained = _wasted(runs["drain"])
    if drained:
        print(f"window / drain, idle + lost GPU-h: {_wasted(runs['window']) / drained:.2f}")


if __name__ == "__main__":
    main()
