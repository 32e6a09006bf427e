"""The caps a job may not start past, in the order the walk checks them: its org's running-GPU
cap, its project's and its submitter's inside the org, and its tier's burst ceiling. A job
past one waits with its reason; once the org, project, user or tier is full it leaves the
walk for the round (ranking.RankedQueue.exclude_*), so that 50,000 of its jobs cost one look.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import reasons
from .types import PendingReason, QueuedJob

if TYPE_CHECKING:
    from .gpusched import _Round


def over_org_cap(rnd: _Round, job: QueuedJob) -> bool:
    cap = rnd.snap.org_gpu_caps.get(job.org)
    return cap is not None and rnd.shares.org[job.org] + job.gpus > cap


def over_project_cap(rnd: _Round, job: QueuedJob) -> bool:
    cap = rnd.snap.project_gpu_caps.get((job.org, job.project))
    return cap is not None and rnd.shares.project[job.org, job.project] + job.gpus > cap


def over_user_cap(rnd: _Round, job: QueuedJob) -> bool:
    cap = rnd.snap.user_gpu_caps.get((job.org, job.user))
    return cap is not None and rnd.shares.member[job.org, job.user] + job.gpus > cap


def over_tier_ceiling(rnd: _Round, job: QueuedJob) -> bool:
    used = rnd.shares.tier[job.tier] + job.gpus
    return rnd.snap.tiers[job.tier].max_share < 1.0 and used > rnd.ceilings[job.tier] + 1e-9


def over_cap(rnd: _Round, job: QueuedJob) -> bool:
    """Past any of its caps or its tier's ceiling."""
    return (over_org_cap(rnd, job) or over_project_cap(rnd, job) or over_user_cap(rnd, job)
            or over_tier_ceiling(rnd, job))


def cap_reason(rnd: _Round, job: QueuedJob) -> PendingReason | None:
    """Why a cap keeps the job from starting (None: none does); what is full leaves the walk
    for this round."""
    snap, shares, queue = rnd.snap, rnd.shares, rnd.queue
    if over_org_cap(rnd, job):
        cap = snap.org_gpu_caps[job.org]
        if shares.org[job.org] >= cap:
            queue.exclude_org(job.tier, job.org)
        return reasons.org_cap(job.org, cap)
    if over_project_cap(rnd, job):
        cap = snap.project_gpu_caps[job.org, job.project]
        if shares.project[job.org, job.project] >= cap:
            queue.exclude_project(job.tier, job.org, job.project)
        return reasons.project_cap(job.org, job.project, cap)
    if over_user_cap(rnd, job):
        cap = snap.user_gpu_caps[job.org, job.user]
        if shares.member[job.org, job.user] >= cap:
            queue.exclude_user(job.tier, job.org, job.user)
        return reasons.user_cap(job.org, job.user, cap)
    if over_tier_ceiling(rnd, job):
        ceiling, tier_used = rnd.ceilings[job.tier], shares.tier[job.tier]
        if tier_used >= ceiling - 1e-9:
            queue.exclude_tier(job.tier)
        return reasons.tier_ceiling(job.tier, ceiling)
    return None
