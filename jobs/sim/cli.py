"""Command line: `python -m jobs.sim --trace video|PATH --policy NAME|all ...`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace

from jobs.policy import POLICIES
from jobs.policy.types import Decisions, PolicyConfig, Snapshot, TierSpec
from jobs.policy_build import running_compiled

from . import overrides, trace_philly, workload_video
from .engine import SimResult, Simulator
from .metrics import summarize
from .model import Maintenance, NodeSpec, SimJob, build_fleet, default_tiers
from .policies import resolve
from .report import table
from .runtimes import LearnedRunTimes


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m jobs.sim", description=__doc__)
    p.add_argument("--trace", default="video", help="'video' or a Philly-format CSV path")
    p.add_argument("--policy", default="all", help="gpusched|fifo|priority|multifactor|all, "
                   "or a comma-separated list")
    p.add_argument("--nodes", type=int, default=64)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--gpu-types", default="", help="e.g. H100:0.5,A100:0.5")
    p.add_argument("--island-nodes", type=int, default=8, help="nodes per island (rack)")
    p.add_argument("--load", type=float, default=1.0, help="video: offered load, 1.0 = capacity")
    p.add_argument("--horizon", type=float, default=3600.0,
                   help="video: seconds of arrivals (the run continues until jobs drain)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start-day", type=float, default=28.0, help="trace: window start (days)")
    p.add_argument("--days", type=float, default=7.0, help="trace: window length (days)")
    p.add_argument("--max-jobs", type=int, default=None)
    p.add_argument("--checkpoint-interval", type=float, default=0.0,
                   help="seconds of progress between checkpoints; 0: jobs do not checkpoint")
    p.add_argument("--restore-cost", type=float, default=30.0)
    p.add_argument("--node-failures", type=float, default=0.0, help="failures per node-hour")
    p.add_argument("--repair-time", type=float, default=1800.0)
    p.add_argument("--crashes", type=float, default=0.0,
                   help="binary crashes per GPU-hour of running (a gang's try ends at any)")
    p.add_argument("--max-retries", type=int, default=3,
                   help="retries of a job after lost or crashed tries, then it is dead "
                        "(the service's GPUSCHED_MAX_RETRIES)")
    p.add_argument("--retry-backoff", type=float, default=5.0,
                   help="seconds before a first retry, doubling each (GPUSCHED_RETRY_BACKOFF_S)")
    p.add_argument("--period", type=float, default=None,
                   help="seconds between periodic rounds while jobs wait (video 10, trace 60)")
    p.add_argument("--round-interval", type=float, default=1.0,
                   help="minimum seconds between event-driven rounds")
    p.add_argument("--starve-after", type=float, default=None,
                   help="seconds after which a tier's oldest job goes first in its tier "
                        "(default: the policy's, 12 h; 0: never)")
    p.add_argument("--tier", action="append", default=[], metavar="NAME:FIELD=VALUE,...",
                   help="change a tier for every policy, e.g. "
                        "free:guaranteed_share=0.05; repeatable")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="change a PolicyConfig field, e.g. reserve_share=0.25; repeatable")
    p.add_argument("--max-time", type=float, default=None, help="stop at this virtual time")
    p.add_argument("--project-spread", type=float, default=None, metavar="SIGMA",
                   help="video: each project's runs scattered by SIGMA (of their log) around "
                        "a typical run of its own (default: runs owe nothing to the project)")
    p.add_argument("--estimates", choices=("client", "learned", "none"), default="client",
                   help="what plans each job's run: the client's estimate, the run times "
                        "its project's jobs took (learned), or only its time limit")
    p.add_argument("--time-limit", type=float, default=0.0,
                   help="every job's time limit in seconds, as clients that set none get "
                        "(0: the workload's)")
    p.add_argument("--line-every", type=float, default=0.0,
                   help="gpusched: draw the queue line every SECONDS, as the service does, and "
                        "report how the work ahead it shows compares to the wait (0: off)")
    p.add_argument("--maintenance-nodes", type=int, default=0,
                   help="the first N nodes (whole islands first) go into maintenance "
                        "(docs/simulator.md, Maintenance; 0: none)")
    p.add_argument("--maintenance-at", type=float, default=86400.0,
                   help="when their maintenance begins, seconds of virtual time")
    p.add_argument("--maintenance-for", type=float, default=4 * 3600.0,
                   help="how long it lasts, seconds")
    p.add_argument("--maintenance-notice", type=float, default=86400.0,
                   help="how long before it operators know, seconds")
    p.add_argument("--maintenance-mode", choices=("window", "drain", "none"), default="window",
                   help="what the notice does: the service's maintenance window, a drain of "
                        "the nodes, or nothing")
    p.add_argument("--json", default=None, help="write the figures here")
    p.add_argument("--quiet", action="store_true")
    return p


def _types(spec: str) -> dict[str, float] | None:
    if not spec:
        return None
    out = {}
    for part in spec.split(","):
        name, _, frac = part.partition(":")
        out[name.strip()] = float(frac or 1.0)
    return out


def config_for(args: argparse.Namespace) -> PolicyConfig:
    config = PolicyConfig()
    if args.starve_after is not None:
        config = replace(config, starve_after_s=args.starve_after or None)
    return overrides.apply_config(getattr(args, "set", []), config)


def tiers_for(args: argparse.Namespace) -> dict[str, TierSpec]:
    return overrides.apply_tiers(getattr(args, "tier", []), default_tiers())


def refuse_bad_overrides(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Stop with a usage error on a bad --tier or --set, before any run starts."""
    try:
        tiers_for(args)
        config_for(args)
    except ValueError as exc:
        p.error(str(exc))


def workload(args: argparse.Namespace, gpus: int) -> list[SimJob]:
    if args.trace == "video":
        jobs = workload_video.generate(gpus, args.load, args.horizon, args.seed)
        if args.project_spread is not None:
            workload_video.with_alike_projects(jobs, args.project_spread, args.seed)
    else:
        jobs = trace_philly.load(args.trace, args.start_day, args.days, args.max_jobs)
    for job in jobs:
        if args.estimates != "client":  # as from clients that send no estimate
            job.expected_duration = None
            job.extra["unestimated"] = True
        if args.time_limit:
            job.time_limit = args.time_limit
    return jobs


def simulate(args: argparse.Namespace,
             policy: Callable[[Snapshot], Decisions]) -> SimResult:
    """One run of `policy` on the workload and fleet that `args` name."""
    fleet = build_fleet(args.nodes, args.gpus_per_node, _types(args.gpu_types),
                        args.island_nodes)
    jobs = workload(args, sum(n.gpus for n in fleet))  # fresh jobs: the engine mutates them
    period = args.period or (10.0 if args.trace == "video" else 60.0)
    sim = Simulator(fleet, jobs, policy, tiers_for(args), config=config_for(args),
                    checkpoint_interval=args.checkpoint_interval,
                    restore_cost=args.restore_cost, node_failure_rate=args.node_failures,
                    repair_s=args.repair_time, crash_rate=args.crashes,
                    max_retries=args.max_retries, retry_backoff_s=args.retry_backoff,
                    seed=args.seed, period=period,
                    round_interval=args.round_interval,
                    max_time=args.max_time if args.max_time is not None else float("inf"),
                    line_every=args.line_every if policy is POLICIES["gpusched"] else 0.0,
                    learner=LearnedRunTimes() if args.estimates == "learned" else None,
                    maintenance=maintenance_for(args, fleet))
    return sim.run()


def maintenance_for(args: argparse.Namespace, fleet: list[NodeSpec]) -> Maintenance | None:
    if not args.maintenance_nodes:
        return None
    return Maintenance(tuple(n.name for n in fleet[:args.maintenance_nodes]),
                       args.maintenance_at, args.maintenance_for, args.maintenance_notice,
                       args.maintenance_mode)


def run(args: argparse.Namespace) -> dict[str, dict]:
    results = {}
    for name, policy in resolve(args.policy).items():
        t0 = time.perf_counter()
        fig = summarize(simulate(args, policy))
        fig["wall_s"] = time.perf_counter() - t0
        results[name] = fig
        if not args.quiet:
            print(f"# {name}: {fig['jobs']} jobs, offered load {fig['offered_load']:.2f}, "
                  f"{fig['wall_s']:.1f} s wall", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    refuse_bad_overrides(p, args)
    results = run(args)
    title = (f"{args.trace} on {args.nodes}x{args.gpus_per_node} GPUs"
             + (f", load {args.load}" if args.trace == "video" else
                f", days {args.start_day:g}+{args.days:g}"))
    print(table(results, title))
    for name, fig in results.items():
        for note in fig["notes"][:5]:
            print(f"note ({name}): {note}")
    if args.json:
        with open(args.json, "w") as f:
            # decision_ms and wall_s depend on it (bin/build-policy)
            build = "compiled" if running_compiled() else "interpreted"
            json.dump({"args": vars(args), "policy_build": build, "results": results}, f,
                      indent=1, default=str)
    return 0
