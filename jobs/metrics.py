"""Prometheus text exposition of the queue, the fleet and the scheduler: `GET /metrics`.

Gauges are read from the database at scrape time (live jobs only: the partial index on them
keeps a scrape cheap however many jobs have finished); the scheduler's last round, its
backlog and capacity advice come from what each tick publishes; refusals are counters kept
in the cache, shared by every web process.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.core.cache import cache
from django.db.models import Count, Exists, OuterRef, Sum
from django.utils import timezone

from credits.models import Account
from jobs.models import Attempt, AttemptRank, AttemptStatus, GpuBinding, Job, Tier
from jobs.scheduler.backlog import BACKLOG_KEY
from jobs.states import TERMINAL, JobState
from workers.agent.outcome import FAILURE_KINDS
from workers.models import Gpu, Node, NodeState

LAST_TICK_KEY = "gpusched:last-tick"
log = logging.getLogger(__name__)
_REFUSED_KEY = "gpusched:refused:{}"
_FAILED_KEY = "gpusched:failed:{}"
_LATE_KEY = "gpusched:late-start:{}"
REFUSAL_CODES = ("queue_full", "overloaded", "rate_limited", "insufficient_credits",
                 "budget_exceeded", "insufficient_scope", "organization_suspended")

Sample = tuple[dict[str, str], float]


_counting_refusals: ContextVar[bool] = ContextVar("counting_refusals", default=True)


@contextmanager
def refusals_uncounted() -> Iterator[None]:
    """Refusals inside are not requests refused: a preview's (jobs/services/preview.py)."""
    token = _counting_refusals.set(False)
    try:
        yield
    finally:
        _counting_refusals.reset(token)


def count_refusal(code: str, **fields) -> None:
    """One more request refused with `code` (a counter, never reset but by the cache), and one
    log line with the decision's `fields` (organization_id, the figures behind it): the audit
    trail of refusals, as structured logs (gpusched/logs.py)."""
    if not _counting_refusals.get():
        return
    log.info("refused: %s", code, extra={"refusal": code, **fields})
    key = _REFUSED_KEY.format(code)
    cache.add(key, 0, timeout=None)
    cache.incr(key)


def count_failure(kind: str) -> None:
    """One more try that failed on its node, of `kind` (outcome.FAILURE_KINDS)."""
    key = _FAILED_KEY.format(kind)
    cache.add(key, 0, timeout=None)
    cache.incr(key)


def count_late_start(tier: str) -> None:
    """One more job of `tier` cancelled for not starting by its client's deadline."""
    key = _LATE_KEY.format(tier)
    cache.add(key, 0, timeout=None)
    cache.incr(key)


TICK_PHASES = ("snapshot", "decision", "commit")


def publish_tick(at: float, phases_ms: dict[str, float], compiled: bool,
                 queue_rows_read: int) -> None:
    """The last round: when, how long each phase took (TICK_PHASES), whether the policy ran
    compiled, and how many queued rows its snapshot read in full (queue_cache.py)."""
    cache.set(LAST_TICK_KEY, {"at": at, "decision_ms": phases_ms["decision"],
                              "phases_ms": phases_ms, "compiled": compiled,
                              "queue_rows_read": queue_rows_read}, timeout=None)


def render() -> str:
    """Every metric in the text format, version 0.0.4."""
    out: list[str] = []
    for name, kind, text, samples in _metrics():
        out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        # repr, not :g, whose six digits would round a Unix time to a quarter of an hour
        out += [f"{name}{_labels(labels)} {float(value)!r}" for labels, value in samples]
    return "\n".join(out) + "\n"


def _metrics() -> Iterable[tuple[str, str, str, list[Sample]]]:
    live = Job.objects.exclude(state__in=sorted(TERMINAL))  # as the index says it
    yield ("gpusched_jobs", "gauge", "Jobs not finished, by state.",
           [({"state": s}, n) for s, n in live.values_list("state").annotate(Count("id"))])
    queued = live.filter(state=JobState.QUEUED).values_list("organization__tier__name")
    yield ("gpusched_queued_gpus", "gauge", "GPUs asked for by queued jobs, by tier.",
           [({"tier": t}, n) for t, n in queued.annotate(Sum("gpus"))])
    bound = GpuBinding.objects.filter(released_at__isnull=True).values_list(
        "attempt__job__organization__tier__name")
    yield ("gpusched_running_gpus", "gauge", "GPUs bound to live attempts, by tier.",
           [({"tier": t}, n) for t, n in bound.annotate(Count("id"))])
    spanning = AttemptRank.objects.filter(attempt__ended_at__isnull=True).values("attempt_id")
    yield ("gpusched_gangs_across_nodes", "gauge",
           "Live attempts whose gang spans nodes (docs/nodes.md).",
           [({}, spanning.distinct().count())])
    yield ("gpusched_work_at_risk_gpu_seconds", "gauge",
           "GPU-seconds of running jobs' work that no checkpoint they stored keeps: what "
           "losing their nodes now would throw away, by tier (docs/nodes.md, Checkpoints).",
           _work_at_risk())
    gpus = Gpu.objects.values_list("node__gpu_type", "node__state", "health")
    yield ("gpusched_gpus", "gauge", "GPUs of the fleet, by type, node state and health.",
           [({"gpu_type": g, "node_state": s, "health": h}, n)
            for g, s, h, n in gpus.annotate(Count("id"))])
    yield ("gpusched_nodes_cordoned_for_failures", "gauge",
           "Nodes the scheduler cordoned because job after job failed there; an operator "
           "returns them (docs/nodes.md, Failures and retries).",
           [({}, Node.objects.filter(state=NodeState.CORDONED).exclude(state_reason="").count())])
    windows = Gpu.objects.filter(node__maintenance_at__isnull=False).exclude(
        node__state=NodeState.DOWN).values_list("node__gpu_type")
    yield ("gpusched_gpus_in_maintenance_windows", "gauge",
           "GPUs of nodes not down with a maintenance window set, begun or ahead: capacity "
           "that takes only jobs ending before it, or none (docs/nodes.md), by type.",
           [({"gpu_type": g}, n) for g, n in windows.annotate(Count("id"))])
    yield ("gpusched_dedicated_gpus", "gauge",
           "GPUs of nodes dedicated to an organization now (docs/nodes.md), by organization, "
           "type and whether a live attempt holds them: reserved capacity, and how much of "
           "it its owner uses.", _dedicated())
    yield from _published()
    yield from _ledger()
    yield ("gpusched_attempt_failures_total", "counter",
           "Tries that failed on their node since the cache was last emptied, by kind: a "
           "rise on every node is a bad release of the binary, on one node a failing node "
           "(docs/nodes.md, Failures and retries).",
           [({"kind": k}, cache.get(_FAILED_KEY.format(k), 0)) for k in FAILURE_KINDS])
    yield ("gpusched_start_deadlines_missed_total", "counter",
           "Jobs cancelled since the cache was last emptied because they had not started "
           "by their client's deadline (start_within_s), by tier: what clients would not "
           "wait for, a sign the fleet is short.",
           [({"tier": t}, cache.get(_LATE_KEY.format(t), 0))
            for t in Tier.objects.order_by("-priority").values_list("name", flat=True)])
    yield ("gpusched_requests_refused_total", "counter",
           "Requests refused (429, or 402 for credits) since the cache was last emptied, by "
           "code.",
           [({"code": c}, cache.get(_REFUSED_KEY.format(c), 0)) for c in REFUSAL_CODES])


def _dedicated() -> list[Sample]:
    held = GpuBinding.objects.filter(gpu=OuterRef("pk"), released_at__isnull=True)
    gpus = Gpu.objects.filter(node__dedicated_to__isnull=False,
                              node__dedicated_from__isnull=True).exclude(
        node__state=NodeState.DOWN).annotate(busy=Exists(held)).values_list(
        "node__dedicated_to__slug", "node__gpu_type", "busy")
    return [({"organization": o, "gpu_type": g, "in_use": str(busy).lower()}, n)
            for o, g, busy, n in gpus.annotate(n=Count("id")).values_list(
                "node__dedicated_to__slug", "node__gpu_type", "busy", "n")]


def _work_at_risk() -> list[Sample]:
    now = timezone.now()
    running = Attempt.objects.filter(
        status=AttemptStatus.RUNNING, ended_at__isnull=True, gpus_freed_at__isnull=True,
        started_at__isnull=False).values_list(
        "job__organization__tier__name", "job__gpus", "started_at", "last_checkpoint_at")
    risk: dict[str, float] = defaultdict(float)
    for tier, gpus, started, kept in running:
        risk[tier] += gpus * max(0.0, (now - max(started, kept or started)).total_seconds())
    return [({"tier": t}, round(v, 1)) for t, v in sorted(risk.items())]


def _ledger() -> Iterable[tuple[str, str, str, list[Sample]]]:
    """The credit ledger's totals, read off its system accounts (docs/credits.md)."""
    system = {a.code: a for a in Account.objects.filter(kind=Account.Kind.SYSTEM)}
    for name, text, code, value in _LEDGER_FIGURES:
        if code in system:
            yield name, "gauge", text, [({}, value(system[code]))]


_LEDGER_FIGURES = [
    ("gpusched_credits_granted", "Credits granted to organizations, ever.", "issuance",
     lambda a: -a.balance),
    ("gpusched_credits_held", "Credits jobs hold now, not yet spent.", "usage",
     lambda a: a.credits_pending),
    ("gpusched_credits_spent", "Credits jobs spent, less refunds, ever.", "usage",
     lambda a: a.balance),
    ("gpusched_credits_expired", "Credits expired unspent, ever.", "expired",
     lambda a: a.balance),
]


def _published() -> Iterable[tuple[str, str, str, list[Sample]]]:
    from jobs.scheduler.positions import last_publication
    from jobs.scheduler.tick import capacity_advice  # the tick imports this module

    tick = cache.get(LAST_TICK_KEY)
    if tick is not None:
        yield ("gpusched_tick_last_run_timestamp_seconds", "gauge",
               "When the scheduler last ran a round (Unix time).", [({}, tick["at"])])
        yield ("gpusched_tick_decision_seconds", "gauge",
               "How long the last round's policy decision took.",
               [({}, tick["decision_ms"] / 1000)])
        phases = tick.get("phases_ms", {})
        yield ("gpusched_tick_phase_seconds", "gauge",
               "How long each phase of the last round took: loading its snapshot, the "
               "policy's decision, committing the decisions.",
               [({"phase": p}, phases[p] / 1000) for p in TICK_PHASES if p in phases])
        yield ("gpusched_tick_queue_rows_read", "gauge",
               "Queued jobs' rows the last round read in full: those changed since the round "
               "before, or the whole queue when the scheduler process started.",
               [({}, tick.get("queue_rows_read", 0))])
        yield ("gpusched_tick_policy_compiled", "gauge",
               "1 where the last round's policy ran compiled (bin/build-policy), 0 where it "
               "ran interpreted.", [({}, int(tick.get("compiled", 0)))])
    backlog = cache.get(BACKLOG_KEY)
    yield ("gpusched_backlog_seconds", "gauge",
           "How long the work waiting at each tier or above would keep the fleet busy.",
           [({"tier": t}, s) for t, s in (backlog["seconds"] if backlog else {}).items()])
    line = last_publication()
    if line is not None:
        yield ("gpusched_queue_line_timestamp_seconds", "gauge",
               "When the scheduler last drew the line of waiting jobs that queue positions "
               "are read from (Unix time).", [({}, line["at"])])
        yield ("gpusched_queue_line_seconds", "gauge",
               "How long drawing and publishing that line took.", [({}, line["ms"] / 1000)])
    yield ("gpusched_capacity_short_gpus", "gauge",
           "GPUs per type the fleet lacks to meet every tier's start SLO (last round).",
           [({"gpu_type": g}, n) for g, n in capacity_advice()["short_gpus"].items()])


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    pairs = (f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return "{" + ",".join(pairs) + "}"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
