"""Figures of one simulation run (definitions in docs/simulator.md)."""

from __future__ import annotations

from collections import defaultdict

from .engine import SimResult

MIN_BACKLOG_S = 60.0  # an org enters the Jain index once it had this much backlog
# Jain per tier: x_org = GPU-time the org held while its tier had jobs waiting / the GPU-time
# a weighted max-min fair split of its tier's running GPUs (by running + waiting demand)
# would have given it over the same periods. A fair scheduler gives x = 1 for every org.
# The same over only the periods the org itself had jobs waiting is reported beside it: an
# org whose one job waits holds nothing then, x = 0 under any policy.
_RATIOS = {"fair_ratio": ("contended_gpu", "contended_fair"),
           "fair_ratio_while_waiting": ("backlog_gpu", "fair_gpu")}


def pct(values: list[float], q: float) -> float:
    """Percentile with linear interpolation; 0 for an empty list."""
    if not values:
        return 0.0
    v = sorted(values)
    k = (len(v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def jain(xs: list[float]) -> float:
    s, s2 = sum(xs), sum(x * x for x in xs)
    return (s * s) / (len(xs) * s2) if xs and s2 > 0 else 1.0


def wait(job, end_time: float) -> float:
    """Submit to first start; a job that never started waited until the run's end."""
    return (job.first_start if job.first_start is not None else end_time) - job.submit


def _waits(jobs, end_time: float) -> list[float]:
    return [wait(j, end_time) for j in jobs]


def _dist(waits: list[float]) -> dict[str, float]:
    return {"wait_mean": mean(waits), "wait_p50": pct(waits, 50), "wait_p95": pct(waits, 95),
            "wait_p99": pct(waits, 99), "wait_max": max(waits, default=0.0)}


def _p95_by_gpus(jobs, end_time: float) -> dict[int, float]:
    """p95 wait per gang size: which gangs make a tier's tail."""
    by_gpus: dict[int, list] = defaultdict(list)
    for j in jobs:
        by_gpus[j.gpus].append(j)
    return {g: pct(_waits(js, end_time), 95) for g, js in sorted(by_gpus.items())}


def _estimate_error(jobs) -> dict[str, float | int]:
    """How much later than their first reservation said jobs started (negative: sooner)."""
    late = [j.first_start - j.first_estimate for j in jobs
            if j.first_estimate is not None and j.first_start is not None]
    return {"estimated_jobs": len(late),
            "start_after_estimate_p50": pct(late, 50) if late else None,
            "start_after_estimate_p95": pct(late, 95) if late else None}


def _line_error(jobs) -> dict[str, float | int | None]:
    """How much longer than the fleet work ahead of them, in the first line that showed
    them, jobs waited from that line to their start (negative: shorter)."""
    late = [j.first_start - j.first_line[0] - j.first_line[1] for j in jobs
            if j.first_line is not None and j.first_start is not None]
    return {"line_jobs": len(late),
            "start_after_work_ahead_p50": pct(late, 50) if late else None,
            "start_after_work_ahead_p95": pct(late, 95) if late else None}


def _jain_by_tier(res: SimResult, per_org: dict, tiers, key: str) -> dict:
    """Jain's index per tier over the orgs with backlog, of their x (`_RATIOS[key]`), each
    org's x kept in its `per_org` row under `key`."""
    held, fair = _RATIOS[key]
    xs_by_tier: dict[str, list[float]] = defaultdict(list)
    for org, acc in res.org_acc.items():
        if org not in per_org or acc["backlog_time"] < MIN_BACKLOG_S or acc[fair] <= 0:
            continue
        x = per_org[org][key] = acc[held] / acc[fair]
        xs_by_tier[per_org[org]["tier"]].append(x)
    return {tier: jain(xs_by_tier[tier]) if xs_by_tier[tier] else None for tier in tiers}


def summarize(res: SimResult) -> dict:
    s, end = res.stats, res.end_time
    jobs = res.jobs
    waits = _waits(jobs, end)
    finished = [j for j in jobs if j.end is not None]
    by_tier, by_org = defaultdict(list), defaultdict(list)
    for j in jobs:
        by_tier[j.tier].append(j)
        by_org[j.org].append(j)
    cap_wait = s["cap_wait"] or 1.0
    per_tier = {}
    for tier, tj in sorted(by_tier.items(), key=lambda kv: -res.tiers[kv[0]].priority
                           if kv[0] in res.tiers else 0):
        acc = res.tier_acc.get(tier, {})
        row = _dist(_waits(tj, end))
        row["wait_p95_by_gpus"] = _p95_by_gpus(tj, end)
        row.update(_estimate_error(tj))
        row.update(_line_error(tj))
        row["jct_mean"] = mean([j.end - j.submit for j in tj if j.end is not None])
        row["queued_mean"] = mean([j.queued_total for j in tj])
        row["gpu_share"] = acc.get("gpu_wait", 0.0) / cap_wait
        row["gpu_share_backlogged"] = (acc.get("backlog_gpu", 0.0) / acc["backlog_cap"]
                                       if acc.get("backlog_cap") else 0.0)
        spec = res.tiers.get(tier)
        row["floor"] = spec.guaranteed_share if spec else 0.0
        row["jobs"] = len(tj)
        row["unstarted"] = sum(1 for j in tj if j.first_start is None)
        per_tier[tier] = row
    per_org = {}
    for org, oj in sorted(by_org.items()):
        w = _waits(oj, end)
        per_org[org] = {"tier": oj[0].tier, "jobs": len(oj), "wait_p50": pct(w, 50),
                        "wait_p95": pct(w, 95), "wait_max": max(w)}
    jain_by_tier, jain_waiting = (_jain_by_tier(res, per_org, per_tier, key)
                                  for key in _RATIOS)
    worst = max(per_org.items(), key=lambda kv: kv[1]["wait_p95"], default=(None, {}))
    delivered = s["busy_time"] / 3600.0
    lost = s["preempt_lost"] / 3600.0
    offered = sum(j.gpu_seconds for j in jobs)
    span = (max(j.submit for j in jobs) - min(j.submit for j in jobs)) if jobs else 0.0
    return {
        "jobs": len(jobs), "finished": len(finished),
        "unstarted": sum(1 for j in jobs if j.first_start is None),
        "offered_load": offered / (res.fleet_gpus * span) if span > 0 else 0.0,
        "utilization": s["busy_wait"] / cap_wait if s["cap_wait"] else 0.0,
        "utilization_overall": s["busy_time"] / s["cap_time"] if s["cap_time"] else 0.0,
        "wait_window_h": s["wait_window"] / 3600.0,
        **_dist(waits),
        "jct_mean": mean([j.end - j.submit for j in finished]),
        "queued_mean": mean([j.queued_total for j in jobs]),
        "per_tier": per_tier, "per_org": per_org,
        "worst_org": worst[0], "worst_org_wait_p95": worst[1].get("wait_p95", 0.0),
        "jain_by_tier": jain_by_tier,
        "jain_while_waiting_by_tier": jain_waiting,
        "preemptions": int(s["preemptions"]),
        "preempted_gpu_hours": lost,
        "failure_lost_gpu_hours": s["failure_lost"] / 3600.0,
        "node_failures": int(s["node_failures"]),
        "maintenance_stopped": int(s["maintenance_stopped"]),
        "maintenance_lost_gpu_hours": s["maintenance_lost"] / 3600.0,
        "maintenance_idle_gpu_hours": s["maintenance_idle"] / 3600.0,
        "crashes": int(s["crashes"]), "retries": int(s["retries"]),
        "dead_jobs": int(s["dead"]),
        "delivered_gpu_hours": delivered,
        "preempted_fraction": lost / delivered if delivered else 0.0,
        **_loss_breakdown(res.loss_by),
        "decision_ms_p50": pct(res.decision_ms, 50), "decision_ms_p99": pct(res.decision_ms, 99),
        "decision_ms_max": max(res.decision_ms, default=0.0),
        "rounds": int(s["rounds"]), "invalid_placements": int(s["invalid_placements"]),
        "missing_pending_reasons": int(s["missing_reasons"]),
        "nonpreemptible_victims": int(s["nonpreemptible_victims"]),
        "stalled": bool(s["stalled"]), "end_time_h": end / 3600.0, "notes": res.notes,
    }


def _loss_breakdown(loss_by: dict[tuple[str, int, str, int], list[float]]) -> dict:
    """Work lost at preemption stops, by who preempted whom: where the loss comes from.

    `preemption_loss` has one row per (preemptor tier and GPUs, victim tier and GPUs), the
    dearest first; `preempted_gpu_hours_by_tier` sums it per "preemptor>victim" tier pair.
    Restores after checkpoints are not in it (they count in `preempted_gpu_hours`).
    """
    rows = [{"preemptor": pt, "preemptor_gpus": pg, "victim": vt, "victim_gpus": vg,
             "victims": int(n), "gpu_hours": sec / 3600.0}
            for (pt, pg, vt, vg), (n, sec) in loss_by.items()]
    rows.sort(key=lambda r: -r["gpu_hours"])
    by_tier: dict[str, float] = {}
    for r in rows:
        key = f"{r['preemptor']}>{r['victim']}"
        by_tier[key] = by_tier.get(key, 0.0) + r["gpu_hours"]
    return {"preemption_loss": rows, "preempted_gpu_hours_by_tier": by_tier}
