"""What an organization may do and how much of it it uses now: the limits its tier and its
operators set, beside the figures each is checked against, so that a client paces itself
before it meets a 429 or a 409 rather than after."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from jobs.models import ApiKey, GpuBinding, Job, Organization, WebhookEndpoint
from jobs.scheduler.backlog import backlog_seconds
from jobs.services.admission import WAITING
from jobs.services.tenancy import MAX_KEYS
from jobs.services.webhook_endpoints import MAX_WEBHOOKS


def running_gpu_cap(org: Organization) -> int | None:
    """The cap the round holds it to (jobs/scheduler/snapshot.py)."""
    return Organization.gpu_cap(org.running_gpu_cap, org.tier.max_running_gpus_per_org,
                                org.suspended_at)


def _running_gpus_by(org: Organization, field: str) -> dict[int, int]:
    rows = (GpuBinding.objects.filter(released_at__isnull=True, attempt__job__organization=org)
            .values_list(f"attempt__job__{field}").annotate(n=Count("pk")).order_by())
    return dict(rows)


def running_gpus_by_project(org: Organization) -> dict[int, int]:
    """Project id -> GPUs its jobs hold now (a project that holds none is absent)."""
    return _running_gpus_by(org, "project_id")


def running_gpus_by_member(org: Organization) -> dict[int, int]:
    """User id -> GPUs the jobs they sent hold now (one who holds none is absent)."""
    return _running_gpus_by(org, "submitted_by_id")


def limits_and_usage(org: Organization) -> dict:
    """`limits` (null: none) and `usage`, each usage figure under its limit's name (but
    the request rate's, which the API's throttle counts: jobs/api/throttles.py)."""
    tier = org.tier
    return {
        "limits": {
            "running_gpus": running_gpu_cap(org),
            "waiting_jobs": tier.max_queued_jobs_per_org,
            "requests_per_min": tier.api_requests_per_min,
            "backlog_s": tier.shed_after_backlog_s,
            "gpus_per_job": settings.GPUSCHED_MAX_GPUS_PER_JOB,
            "max_retries": settings.GPUSCHED_MAX_RETRIES,
            "live_keys": MAX_KEYS,
            "webhooks": MAX_WEBHOOKS,
        },
        "usage": {
            "running_gpus": GpuBinding.objects.filter(
                released_at__isnull=True, attempt__job__organization=org).count(),
            "waiting_jobs": Job.objects.filter(organization=org, state__in=WAITING).count(),
            "backlog_s": backlog_seconds(tier.name),
            "live_keys": org.api_keys.filter(ApiKey.live_at(timezone.now())).count(),
            "webhooks": WebhookEndpoint.objects.filter(organization=org).count(),
        },
    }
