"""What a set of an organization's jobs came to: how many are in each state, the GPUs they
hold now, the GPU-hours they ran and the credits they hold, spent and got back. A batch's
progress and an experiment's cost, read by the labels its client gave its jobs, as cloud
bills are read by cost allocation tags; without labels, the organization's whole history.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, DateTimeField, F, Max, Min, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from credits.models import Hold
from jobs.models import Attempt, Job
from jobs.states import LIVE, TERMINAL


def jobs_summary(jobs: QuerySet[Job], now: datetime) -> dict:
    """The figures of `jobs` (one organization's, already filtered) as of `now`."""
    states = dict(jobs.order_by().values_list("state").annotate(n=Count("pk")))
    span = jobs.aggregate(first=Min("created_at"), last=Max("finished_at"))
    return {
        "jobs": sum(states.values()),
        "states": dict(sorted(states.items())),
        "ended": sum(n for state, n in states.items() if state in TERMINAL),
        "gpus_held": jobs.filter(state__in=LIVE).aggregate(n=Sum("gpus"))["n"] or 0,
        "gpu_hours": round(_gpu_hours(jobs, now), 3),
        "credits": _credits(jobs),
        "first_submitted_at": span["first"],
        "last_ended_at": span["last"],
    }


def _gpu_hours(jobs: QuerySet[Job], now: datetime) -> float:
    """Every try's GPUs × how long it ran (one still running, until now), as the monthly
    usage counts them (credits/services/usage.py): summed by the database a gang size at a
    time, so an organization's whole history is one scan, not a row each."""
    ran = (Attempt.objects.filter(job__in=jobs, started_at__isnull=False)
           .values_list("job__gpus").order_by()
           .annotate(run=Sum(Coalesce("ended_at", Value(now, output_field=DateTimeField()))
                             - F("started_at"))))
    return sum(gpus * max(0.0, run.total_seconds()) for gpus, run in ran if run) / 3600


def _credits(jobs: QuerySet[Job]) -> dict[str, int]:
    """As `credits.services.holds.job_credits` gives one job's, over all of them."""
    totals = Hold.objects.filter(job__in=jobs).aggregate(
        held=Sum(F("amount") - F("posted") - F("voided"), filter=Q(closed_at__isnull=True)),
        posted=Sum("posted"), refunded=Sum("refunded"))
    posted, refunded = totals["posted"] or 0, totals["refunded"] or 0
    return {"held": totals["held"] or 0, "spent": posted - refunded, "refunded": refunded}
