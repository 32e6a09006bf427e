"""Build the policy's Snapshot from the database (reads only)."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from jobs import policy as P
from jobs.models import Attempt, GpuBinding, Job, Organization, Tier
from jobs.states import JobState
from workers.models import Gpu, Node, NodeState


def ts(value: datetime | None) -> float | None:
    return value.timestamp() if value else None


def load_tiers() -> dict[str, P.TierSpec]:
    return {
        t.name: P.TierSpec(
            name=t.name, priority=t.priority, weight=t.weight,
            guaranteed_share=t.guaranteed_share, max_share=t.max_share,
            start_slo_s=float(t.start_slo_seconds), preemptible=t.preemptible,
            max_preemptions=t.max_preemptions,
        )
        for t in Tier.objects.all()
    }


def load_nodes(now: datetime) -> list[P.NodeView]:
    fresh_after = now - timedelta(seconds=settings.GPUSCHED_NODE_STALE_SECONDS)
    live = GpuBinding.objects.filter(released_at__isnull=True)
    bound = set(live.values_list("gpu_id", flat=True))
    free: dict[int, list[int]] = defaultdict(list)
    for gpu_id, node_id, index in Gpu.objects.filter(health=Gpu.Health.HEALTHY).values_list(
        "id", "node_id", "index"
    ):
        if gpu_id not in bound:
            free[node_id].append(index)
    nodes = []
    for n in Node.objects.exclude(state=NodeState.DOWN).order_by("name"):
        alive = n.last_heartbeat is not None and n.last_heartbeat >= fresh_after
        nodes.append(P.NodeView(
            name=n.name, gpu_type=n.gpu_type, gpu_memory_mb=n.gpu_memory_mb,
            total_gpus=n.gpu_count, free_gpus=tuple(sorted(free[n.id])), region=n.region,
            island=n.island, schedulable=alive and n.state == NodeState.ACTIVE,
        ))
    return nodes


def load_running(now: datetime) -> list[P.RunningView]:
    out = []
    live = Attempt.objects.filter(ended_at__isnull=True).select_related(
        "job__organization__tier", "job__project", "node")
    for a in live:
        job = a.job
        start = a.started_at or a.created_at
        limit_end = start.timestamp() + job.time_limit_s
        stopping = bool(a.stop_requested)
        expected_end = a.stop_deadline.timestamp() if stopping and a.stop_deadline else limit_end
        out.append(P.RunningView(
            attempt_id=a.pk, job_id=job.pk, org=job.organization.slug,
            tier=job.organization.tier.name, project=job.project.name,
            allocations=(P.Allocation(a.node.name, tuple(a.gpu_indices)),),
            started_at=start.timestamp(), expected_end=min(expected_end, limit_end),
            time_limit_end=limit_end, last_checkpoint_at=ts(a.last_checkpoint_at),
            checkpointable=job.checkpointable,
            # an attempt already asked to stop is not a victim twice
            preemptible=job.preemptible and not stopping,
            preemptions=job.preemptions,
        ))
    return out


def load_queued() -> list[P.QueuedJob]:
    """Waiting jobs, less those whose GPUs are being freed for them by preemption: the
    policy must not preempt for them again while their victims stop."""
    promised = Attempt.objects.filter(ended_at__isnull=True, preempted_for__isnull=False
                                      ).values_list("preempted_for_id", flat=True)
    rows = Job.objects.filter(state=JobState.QUEUED).exclude(pk__in=list(promised)
                                                             ).select_related(
        "organization__tier", "project").order_by("enqueued_at")
    return [
        P.QueuedJob(
            job_id=j.pk, org=j.organization.slug, tier=j.organization.tier.name, gpus=j.gpus,
            enqueued_at=j.enqueued_at.timestamp(), time_limit_s=float(j.time_limit_s),
            expected_duration_s=j.params.get("expected_duration_s"),
            gpu_types=tuple(j.gpu_types), min_gpu_memory_mb=j.min_gpu_memory_mb,
            region=j.region, project=j.project.name, preemptions=j.preemptions,
            checkpointable=j.checkpointable,
        )
        for j in rows
    ]


def load_usage(now: datetime, half_life_s: float) -> tuple[dict, dict]:
    """Decayed GPU-seconds per org and per (org, project) over recent attempts."""
    horizon = now - timedelta(seconds=6 * half_life_s)
    org_usage: dict[str, float] = defaultdict(float)
    project_usage: dict[tuple[str, str], float] = defaultdict(float)
    recent = Attempt.objects.filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=horizon), started_at__isnull=False
    ).values_list("job__organization__slug", "job__project__name", "gpu_indices",
                  "started_at", "ended_at")
    for org, project, gpus, started, ended in recent:
        end = (ended or now).timestamp()
        age = now.timestamp() - end  # decay from the end of use: simple and monotone
        used = len(gpus) * max(0.0, end - started.timestamp()) * math.pow(0.5, age / half_life_s)
        org_usage[org] += used
        project_usage[(org, project)] += used
    return dict(org_usage), dict(project_usage)


def load_org_caps() -> tuple[dict[str, float], dict[str, int]]:
    weights, caps = {}, {}
    for slug, weight, cap, tier_cap in Organization.objects.values_list(
        "slug", "weight", "running_gpu_cap", "tier__max_running_gpus_per_org"
    ):
        weights[slug] = weight
        if (cap or tier_cap) is not None:
            caps[slug] = cap if cap is not None else tier_cap
    return weights, caps


def policy_config() -> P.PolicyConfig:
    return P.PolicyConfig(usage_half_life_s=settings.GPUSCHED_USAGE_HALF_LIFE_S,
                          min_runtime_before_preempt_s=settings.GPUSCHED_PREEMPT_MIN_RUNTIME_S)


def load_snapshot(now: datetime) -> P.Snapshot:
    config = policy_config()
    usage, project_usage = load_usage(now, config.usage_half_life_s)
    weights, caps = load_org_caps()
    return P.Snapshot(
        now=now.timestamp(), nodes=load_nodes(now), running=load_running(now),
        queued=load_queued(), tiers=load_tiers(), usage=usage, project_usage=project_usage,
        org_weights=weights, org_gpu_caps=caps, config=config,
    )
