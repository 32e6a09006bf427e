"""Pending reasons: why a queued job did not start this round, in words a customer reads.

Codes (stable, machine-readable):

* ``resources``     — not enough free GPUs that fit the job; reserved GPUs and an estimated
  start when the job holds a reservation.
* ``reserved_for_other`` — it would fit now, but only on GPUs reserved for a job ranked
  ahead of it, and it would not end before that job's start.
* ``org_cap``       — the organization is at its running-GPU cap.
* ``project_cap``   — the job's project is at its running-GPU cap.
* ``user_cap``      — the job's submitter is at their running-GPU cap in the org.
* ``tier_ceiling``  — the job's tier is at its burst ceiling.
* ``tier_share``    — the job's tier is above its guaranteed share while a higher tier waits.
* ``priority``      — waiting behind higher-ranked jobs (the fleet is full this round).
* ``no_fit``        — no node or island of the fleet can hold the job as asked (a node that
  is down is out of the fleet until its worker starts again).
* ``out_of_service`` — no node taking work can hold it, but nodes out of service now
  (cordoned, draining, in maintenance or not heard from) could, or no node takes work at
  all: it starts when one returns.
* ``maintenance``   — only nodes that leave service for maintenance before the job's time
  limit would end can hold it.
* ``unknown_tier``  — the job names a tier the scheduler does not know.

Jobs that were never looked at this round (the fleet filled up first) share one reason
object per (tier, code), which keeps a 50,000-job queue cheap.
"""

from __future__ import annotations

import time

from .types import PendingReason, QueuedJob


def clock(t: float, now: float) -> str:
    """'14:05 UTC (in 12 min)' for people; seconds since the epoch in."""
    wall = time.strftime("%H:%M", time.gmtime(t))
    mins = max(0, round((t - now) / 60))
    if mins < 120:
        return f"{wall} UTC (in {mins} min)"
    return f"{wall} UTC (in {mins / 60:.1f} h)"


def gpu_words(job: QueuedJob, span: bool = False) -> str:
    kind = "/".join(job.gpu_types) if job.gpu_types else "GPUs"
    if job.gpu_types:
        kind += " GPU" if job.gpus == 1 else " GPUs"
    where = "inside one island" if span else "on one node"
    extras = []
    if job.min_gpu_memory_mb:
        extras.append(f">= {job.min_gpu_memory_mb} MB each")
    if job.region:
        extras.append(f"in region {job.region}")
    tail = f" ({', '.join(extras)})" if extras else ""
    return f"{job.gpus} free {kind} {where}{tail}"


def resources(
    job: QueuedJob,
    now: float,
    span: bool,
    reserved_nodes: list[str] | None,
    start: float | None,
    what_if: str = "",
) -> PendingReason:
    text = f"needs {gpu_words(job, span)}"
    if reserved_nodes:
        text += f"; reserved {', '.join(reserved_nodes)}"
    if start is not None:
        text += f", estimated start {clock(start, now)}" if reserved_nodes else (
            f"; not before {clock(start, now)}, after jobs ranked ahead"
        )
    return PendingReason("resources", text, start if reserved_nodes else None, what_if)


def unestimated(job: QueuedJob, now: float, span: bool,
                cache: dict[tuple, PendingReason]) -> PendingReason:
    """`resources` with no reservation, estimate or what-if: one object per job shape."""
    key = (job.gpus, job.gpu_types, job.min_gpu_memory_mb, job.region, span)
    reason = cache.get(key)
    if reason is None:
        reason = cache[key] = resources(job, now, span, None, None)
    return reason


def reserved_for_other(job: QueuedJob, other: int, start: float, now: float) -> PendingReason:
    text = (
        f"fits now only on GPUs reserved for job {other} from {clock(start, now)}, "
        f"and its time limit ({job.time_limit_s / 60:.0f} min) would delay that job"
    )
    return PendingReason("reserved_for_other", text)


def org_cap(org: str, cap: int) -> PendingReason:
    if cap == 0:  # an operator's stop (or a suspension), not a share used up
        return PendingReason("org_cap", f"organization {org} may start no new work now "
                                        f"(running-GPU cap 0)")
    return PendingReason("org_cap", f"organization {org} is at its running-GPU cap ({cap})")


def project_cap(org: str, project: str, cap: int) -> PendingReason:
    return PendingReason("project_cap",
                         f"project {project} of {org} is at its running-GPU cap ({cap})")


def user_cap(org: str, user: str, cap: int) -> PendingReason:
    return PendingReason("user_cap", f"its submitter (user {user}) is at their running-GPU cap "
                                     f"in {org} ({cap})")


# The next three reasons are shared by the queue's tail, often thousands of jobs: they name
# no count that moves from round to round (GPUs running, GPUs free), or every start or stop
# would rewrite all those jobs' reasons (13,000 rows a tick at 20,000 queued).


def tier_ceiling(tier: str, ceiling: float) -> PendingReason:
    text = f"tier {tier} is at its burst ceiling ({int(ceiling)} GPUs)"
    return PendingReason("tier_ceiling", text)


def tier_share(tier: str, floor: float, waiting: str) -> PendingReason:
    text = f"tier {tier} is above its share (guaranteed {int(floor)} GPUs) while {waiting} waits"
    return PendingReason("tier_share", text)


def priority(tier: str) -> PendingReason:
    return PendingReason("priority", f"waiting behind higher-ranked jobs in tier {tier} and above")


def no_fit(job: QueuedJob, what_if: str = "") -> PendingReason:
    return PendingReason("no_fit", f"no schedulable node or island can hold {gpu_words(job)}",
                         None, what_if)


def dedicated(job: QueuedJob, what_if: str = "") -> PendingReason:
    return PendingReason("dedicated", f"the only nodes that can hold {gpu_words(job)} are "
                         "dedicated to other organizations", None, what_if)


def dedicated_from(job: QueuedJob, until: float, now: float) -> PendingReason:
    return PendingReason(
        "dedicated", f"the nodes that can hold {gpu_words(job)} are dedicated to other "
        f"organizations by {clock(until, now)}, before its time limit would end")


def out_of_service(job: QueuedJob, back_at: float | None, now: float,
                   what_if: str = "") -> PendingReason:
    return PendingReason(
        "out_of_service", f"the nodes that can hold {gpu_words(job)} are out of service "
        f"(cordoned, draining, in maintenance or not heard from); it starts when one returns"
        f"{_due_back(back_at, now)}", None, what_if)


def maintenance(job: QueuedJob, until: float, now: float) -> PendingReason:
    return PendingReason(
        "maintenance", f"the nodes that can hold {gpu_words(job)} leave service for "
        f"maintenance by {clock(until, now)}, before its time limit would end")


def no_capacity(back_at: float | None = None, now: float = 0.0) -> PendingReason:
    return PendingReason("out_of_service", "no node takes work now (all down, cordoned or "
                         f"silent){_due_back(back_at, now)}")


def _due_back(back_at: float | None, now: float) -> str:
    # a node in a maintenance window with an end returns by then, if not sooner
    return f"; the first is due back by {clock(back_at, now)}" if back_at is not None else ""


def unknown_tier(tier: str) -> PendingReason:
    return PendingReason("unknown_tier", f"tier {tier!r} is not configured")
