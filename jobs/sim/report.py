"""Readable tables of one or several runs' figures, policies side by side."""

from __future__ import annotations


def _fmt_s(v: float | None) -> str:
    """Seconds in the unit that reads best; the sign kept (a start sooner than estimated)."""
    if v is None:
        return "-"
    if abs(v) < 120:
        return f"{v:.1f}s"
    if abs(v) < 7200:
        return f"{v / 60:.1f}m"
    return f"{v / 3600:.1f}h"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _by_gpus(by: dict | None) -> str:
    """{gpus: seconds} as "1: 12.0s, 8: 5.2m" (JSON keys come back as strings)."""
    if not by:
        return "-"
    return ", ".join(f"{g}: {_fmt_s(v)}" for g, v in sorted(by.items(), key=lambda kv: int(kv[0])))


def _by_tier(by: dict[str, float] | None) -> str:
    if not by:
        return "-"
    return ", ".join(f"{k} {v:.1f}" for k, v in sorted(by.items(), key=lambda kv: -kv[1]))


ROWS = [
    ("utilization while jobs wait", lambda r: _pct(r["utilization"])),
    ("utilization overall", lambda r: _pct(r["utilization_overall"])),
    ("wait mean", lambda r: _fmt_s(r["wait_mean"])),
    ("wait p95", lambda r: _fmt_s(r["wait_p95"])),
    ("JCT mean", lambda r: _fmt_s(r["jct_mean"])),
    ("worst org p95 wait", lambda r: _fmt_s(r["worst_org_wait_p95"])),
]
TIER_ROWS = [
    ("p50 wait", "wait_p50", _fmt_s), ("p95 wait", "wait_p95", _fmt_s),
    ("p99 wait", "wait_p99", _fmt_s), ("max wait", "wait_max", _fmt_s),
    ("p95 wait by GPUs", "wait_p95_by_gpus", _by_gpus),
    ("start after first estimate p50", "start_after_estimate_p50", _fmt_s),
    ("start after first estimate p95", "start_after_estimate_p95", _fmt_s),
    ("JCT mean", "jct_mean", _fmt_s), ("GPU share (jobs wait)", "gpu_share", _pct),
    ("GPU share (tier backlogged)", "gpu_share_backlogged", _pct),
]
TAIL_ROWS = [
    ("preemptions", lambda r: str(r["preemptions"])),
    ("GPU-h lost to preemption", lambda r: f"{r['preempted_gpu_hours']:.1f}"),
    ("  of delivered", lambda r: _pct(r["preempted_fraction"])),
    ("  by preemptor > victim tier", lambda r: _by_tier(r.get("preempted_gpu_hours_by_tier"))),
    ("GPU-h delivered", lambda r: f"{r['delivered_gpu_hours']:.0f}"),
    ("decision ms p50 / p99", lambda r: f"{r['decision_ms_p50']:.1f} / "
     f"{r['decision_ms_p99']:.1f}"),
    ("unstarted at end", lambda r: str(r["unstarted"])),
]
# shown where a run had node failures or crashes
FAILURE_ROWS = [
    ("node failures / crashes", lambda r: f"{r['node_failures']} / {r.get('crashes', 0)}"),
    ("retries / dead jobs", lambda r: f"{r.get('retries', 0)} / {r.get('dead_jobs', 0)}"),
    ("GPU-h lost to failures", lambda r: f"{r['failure_lost_gpu_hours']:.1f}"),
]


# shown where a run had a maintenance (--maintenance-nodes)
MAINTENANCE_ROWS = [
    ("maintenance: GPU-h idle from notice", lambda r: f"{r['maintenance_idle_gpu_hours']:.1f}"),
    ("maintenance: tries stopped / GPU-h lost",
     lambda r: f"{r['maintenance_stopped']} / {r['maintenance_lost_gpu_hours']:.1f}"),
]


def table(results: dict[str, dict], title: str = "") -> str:
    """Markdown table: one column per policy."""
    names = list(results)
    lines = []
    if title:
        lines += [f"### {title}", ""]
    lines.append("| figure | " + " | ".join(names) + " |")
    lines.append("| --- |" + " ---: |" * len(names))

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    for label, f in ROWS:
        row(label, [f(results[n]) for n in names])
    tiers: list[str] = []
    for n in names:
        tiers += [t for t in results[n]["per_tier"] if t not in tiers]
    for tier in tiers:
        for label, key, f in TIER_ROWS:
            row(f"{tier} {label}", [f(results[n]["per_tier"].get(tier, {}).get(key))
                                    for n in names])
        row(f"{tier} Jain (orgs)", [_num(results[n]["jain_by_tier"].get(tier)) for n in names])
        row(f"{tier} Jain, while the org waits",
            [_num(results[n].get("jain_while_waiting_by_tier", {}).get(tier)) for n in names])
    failed = any(results[n]["node_failures"] or results[n].get("crashes") for n in names)
    maintained = any(results[n].get("maintenance_idle_gpu_hours") for n in names)
    for label, f in (TAIL_ROWS + (FAILURE_ROWS if failed else [])
                     + (MAINTENANCE_ROWS if maintained else [])):
        row(label, [f(results[n]) for n in names])
    return "\n".join(lines)
