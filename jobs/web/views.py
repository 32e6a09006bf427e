"""The users' dashboard: the jobs of the organizations they belong to, why each waits and
when it should start, how far each runs, and what each made."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from credits.services.holds import job_credits
from credits.services.statements import job_transfers, organization_balance
from jobs.models import Attempt, Job, Organization
from jobs.scheduler.positions import places_of
from jobs.services.cancellation import job_cancel
from jobs.services.errors import ServiceError
from jobs.services.outputs import output_response
from jobs.states import TERMINAL

RECENT = 100  # jobs listed, newest first
REFRESH_S = 5  # a page showing a job that has not ended reloads itself this often


def _jobs_of_user(request: HttpRequest) -> QuerySet[Job]:
    """Jobs of the user's organizations, each with its live attempt (for progress)."""
    live = Prefetch("attempts", queryset=Attempt.objects.filter(ended_at__isnull=True),
                    to_attr="live_attempts")
    return (Job.objects.filter(organization__memberships__user=request.user)
            .select_related("organization", "project").prefetch_related(live))


def _with_positions(jobs: list[Job]) -> list[Job]:
    """Give each waiting job its place in line (`queue_position`), one read for them all."""
    places = places_of(jobs)
    for job in jobs:
        job.queue_position = places.get(job.pk)
    return jobs


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = _with_positions(list(_jobs_of_user(request).order_by("-pk")[:RECENT]))
    orgs = Organization.objects.filter(memberships__user=request.user).order_by("slug")
    return render(request, "dashboard/job_list.html", {
        "jobs": jobs, "balances": [(org, organization_balance(org)) for org in orgs],
        "refresh_s": _refresh(*jobs)})


def _refresh(*jobs: Job) -> int | None:
    """Reload while a job moves: its progress, reason and estimate change by the second."""
    return REFRESH_S if any(job.state not in TERMINAL for job in jobs) else None


def _job_of_user(request: HttpRequest, job_id: int) -> Job:
    job = _jobs_of_user(request).filter(pk=job_id).first()
    if job is None:  # another organization's job is indistinguishable from none
        raise Http404("no such job")
    return job


@login_required
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _with_positions([_job_of_user(request, job_id)])[0]
    return render(request, "dashboard/job_detail.html",
                  {"job": job, "events": job.events.all(), "attempts": job.attempts.all(),
                   "cancellable": job.state not in TERMINAL, "credits": job_credits(job),
                   "transfers": job_transfers(job), "refresh_s": _refresh(job)})


@login_required
@require_POST
def job_cancel_view(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job_of_user(request, job_id)
    try:
        job = job_cancel(job=job, reason=f"cancelled by {request.user.get_username()}")
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.info(request, "Cancelled." if job.state == "CANCELLED" else
                      "Stopping: the job's node stops it at its next heartbeat.")
    return redirect("dashboard-job", job_id=job.pk)


@login_required
def job_output(request: HttpRequest, job_id: int) -> HttpResponse:
    response = output_response(_job_of_user(request, job_id))
    if response is None:
        raise Http404("this job has no output")
    return response
