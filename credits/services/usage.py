"""What an organization used in one calendar month (UTC): credits spent and refunded, and
GPU-hours run, in all, by project and by GPU type; of all its jobs, or of those with labels
(an experiment's, a customer's: cost allocation tags). The statement a tenant reconciles its
invoice or its teams' budgets against."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, date, datetime

from django.db.models import Q, QuerySet, Sum
from django.utils import timezone

from credits.models import Transfer
from jobs.models import Attempt, Job, Organization
from jobs.services.labels import with_labels

# the months a statement or usage is asked of: none used before, and 9999-12 would end
# in a year no datetime holds
FIRST_YEAR, LAST_YEAR = 2000, 9998


def month_bounds(month: date) -> tuple[datetime, datetime]:
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    end = datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def monthly_usage(organization: Organization, month: date, labels: Sequence[str] = ()
                  ) -> dict:
    """Credits by when they moved; GPU-hours by when they ran (an attempt that spans the
    month's edge counts its part inside it; one still running counts until now). With
    `labels`, of the jobs that carry each (`key:value`, or `key` for any value)."""
    start, end = month_bounds(month)
    jobs = with_labels(Job.objects.filter(organization=organization), list(labels))
    projects: dict[str, dict] = defaultdict(lambda: {"spent": 0, "refunded": 0,
                                                     "gpu_hours": 0.0})
    types: dict[str, dict] = defaultdict(lambda: {"spent": 0, "gpu_hours": 0.0})
    moved = (Transfer.objects
             .filter(job__in=jobs, created_at__gte=start, created_at__lt=end,
                     kind__in=[Transfer.Kind.POST, Transfer.Kind.REFUND])
             .values_list("kind", "job__project__name", "attempt__node__gpu_type")
             .annotate(total=Sum("amount")).order_by())
    for kind, project, gpu_type, total in moved:
        if kind == Transfer.Kind.POST:
            projects[project]["spent"] += total
            types[gpu_type or ""]["spent"] += total
        else:
            projects[project]["refunded"] += total
    _add_gpu_hours(jobs, start, end, projects, types)
    return {
        "month": f"{month.year:04d}-{month.month:02d}",
        "spent": sum(p["spent"] for p in projects.values()),
        "refunded": sum(p["refunded"] for p in projects.values()),
        "gpu_hours": round(sum(p["gpu_hours"] for p in projects.values()), 3),
        "projects": [{"project": name, **_rounded(row)} for name, row in sorted(projects.items())],
        "gpu_types": [{"gpu_type": name, **_rounded(row)} for name, row in sorted(types.items())],
    }


def _add_gpu_hours(jobs: QuerySet[Job], start: datetime, end: datetime,
                   projects: dict, types: dict) -> None:
    now = timezone.now()
    ran = (Attempt.objects
           .filter(job__in=jobs, started_at__lt=end)
           .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
           .values_list("job__project__name", "node__gpu_type", "job__gpus", "started_at",
                        "ended_at"))
    for project, gpu_type, gpus, started, ended in ran.iterator(chunk_size=5000):
        seconds = (min(ended or now, end) - max(started, start)).total_seconds()
        if seconds > 0:
            hours = gpus * seconds / 3600
            projects[project]["gpu_hours"] += hours
            types[gpu_type]["gpu_hours"] += hours


def _rounded(row: dict) -> dict:
    return {**row, "gpu_hours": round(row["gpu_hours"], 3)}
