"""The users' dashboard: the jobs of the organizations they belong to, why each waits and
when it should start, how far each runs, and what each made."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from credits.services.holds import job_credits
from credits.services.statements import job_transfers, organization_balance
from jobs.models import Job, Organization
from jobs.scheduler.positions import places_of
from jobs.services.amend import job_amend
from jobs.services.cancellation import job_cancel, jobs_cancel_labelled
from jobs.services.erasure import job_erase, jobs_erase_labelled
from jobs.services.errors import ServiceError
from jobs.services.job_hold import holdable, job_hold, job_release, jobs_hold_labelled
from jobs.services.labels import with_labels
from jobs.services.outputs import output_response
from jobs.services.progress import progress_of
from jobs.services.relaxations import relaxation
from jobs.services.stops import stops_of
from jobs.services.summaries import jobs_summary
from jobs.states import LIVE, TERMINAL, JobState
from jobs.web.access import organizations_with_projects, project_targets
from jobs.web.numbers import whole_number
from workers.services.checkpoint_cuts import resume_point
from workers.services.logs import STREAMS, attempt_log

RECENT = 100  # jobs listed, newest first
REFRESH_S = 5  # a page showing a job that has not ended reloads itself this often
PRINTED_BYTES = 8192  # of each stream of its latest try, on a job's page


def _jobs_of_user(request: HttpRequest) -> QuerySet[Job]:
    """Jobs of the user's organizations (their progress: `_with_positions`). By the
    organizations' ids, not through a join on memberships: a page of the newest is then read
    along each organization's index (organization, -id), not sorted out of all its jobs."""
    mine = list(Organization.objects.filter(memberships__user=request.user).values_list(
        "pk", flat=True))
    return Job.objects.filter(organization_id__in=mine).select_related("organization",
                                                                        "project")


def _with_positions(jobs: list[Job]) -> list[Job]:
    """Give each waiting job its place in line (`queue_position`) and each running one how
    far it is (`run_progress`: jobs/services/progress.py), a read for each of them all."""
    places, progress = places_of(jobs), progress_of(jobs, timezone.now())
    for job in jobs:
        job.queue_position = places.get(job.pk)
        job.run_progress = progress.get(job.pk)
    return jobs


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    """The latest jobs, RECENT a page, older ones after `?before=<id>`; only those of a state
    (`?state=`), of a project (`?project=org/name`) or with a label (`?label=key:value`), as
    the API's list finds them."""
    label, state = request.GET.get("label", "").strip(), request.GET.get("state", "")
    state = state if state in JobState.values else ""  # another is no filter
    orgs = organizations_with_projects(request)
    projects = project_targets(orgs)
    project = request.GET.get("project", "")
    project = project if project in projects else ""  # nor is another organization's
    before = request.GET.get("before", "")
    jobs = _jobs_of_user(request)
    if project:
        slug, _, name = project.partition("/")
        jobs = jobs.filter(organization__slug=slug, project__name=name)
    try:
        jobs = with_labels(jobs, [label] if label else [])
    except ServiceError as exc:
        messages.warning(request, exc.message)
        jobs = jobs.none()
    # a batch's progress and cost, whatever page or state is shown of it
    summary = jobs_summary(jobs, timezone.now()) if label else None
    if state:
        jobs = jobs.filter(state=state)
    if (newest := whole_number(before)) is not None:  # another is no page
        jobs = jobs.filter(pk__lt=newest)
    page = list(jobs.order_by("-pk")[:RECENT + 1])  # one more: is there an older page?
    older = page[RECENT - 1].pk if len(page) > RECENT else None
    jobs_shown = _with_positions(page[:RECENT])
    filters = {k: v for k, v in (("label", label), ("state", state), ("project", project)) if v}
    return render(request, "dashboard/job_list.html", {
        "jobs": jobs_shown, "label": label, "state": state, "project": project,
        "projects": projects, "states": JobState.values, "filtered": bool(filters),
        "summary": summary,
        "older": older and f"?{urlencode({**filters, 'before': older})}",
        "balances": [(org, organization_balance(org)) for org in orgs],
        "refresh_s": None if before else _refresh(*jobs_shown)})


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
    stopping = stops_of([job.pk]).get(job.pk)
    return render(request, "dashboard/job_detail.html",
                  {"job": job, "events": job.events.all(),
                   "attempts": job.attempts.prefetch_related("ranks__node"),
                   "stopping": stopping, "credits": job_credits(job),
                   # asked once is enough: its node is stopping it
                   "cancellable": job.state not in TERMINAL and not (
                       stopping and stopping[0] == "cancel"),
                   "holdable": holdable(job),
                   "erasable": job.state in TERMINAL and not job.erased_at,
                   "resumes_from": resume_point(job), "after": job.after.order_by("pk"),
                   "relaxation": _relaxation_words(job),
                   "transfers": job_transfers(job), "printed": _printed(job),
                   "refresh_s": _refresh(job)})


def _printed(job: Job) -> list[tuple[str, str]]:
    """The end of each stream its latest try printed, as the page shows it."""
    try:
        return [(stream, attempt_log(job, attempt_id=None, stream=stream,
                                     tail=PRINTED_BYTES).data.decode(errors="replace"))
                for stream in STREAMS]
    except ServiceError:  # not started, or its log expired
        return []


@login_required
def job_log(request: HttpRequest, job_id: int, attempt_id: int) -> HttpResponse:
    """The whole log of one try's stream (`?stream=stderr`, `?rank=` a gang's further node),
    as the API gives it."""
    stream = request.GET.get("stream", "stdout")
    rank = whole_number(request.GET.get("rank", "0"))
    if stream not in STREAMS or rank is None:
        raise Http404("no such stream")
    try:
        text = attempt_log(_job_of_user(request, job_id), attempt_id=attempt_id,
                           stream=stream, rank=rank)
    except ServiceError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    return HttpResponse(text.data, content_type="text/plain; charset=utf-8")


def _relaxation(job: Job) -> dict | None:
    return relaxation(job.pending_what_if, job.gpu_types) if job.state == "QUEUED" else None


def _relaxation_words(job: Job) -> str:
    """The button that takes the job's what-if, in words; "" when none is offered."""
    change = _relaxation(job)
    if not change:
        return ""
    if "gpus" in change:
        return f"Run it on {change['gpus']} GPUs instead, keeping its place"
    return f"Also accept {change['gpu_types'][-1]}, keeping its place"


@login_required
@require_POST
def job_relax_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """Take the relaxation the job's pending reason offers now (services/amend.py)."""
    job = _job_of_user(request, job_id)
    change = _relaxation(job)
    if not change:
        messages.warning(request, "No change is offered for this job now.")
        return redirect("dashboard-job", job_id=job.pk)
    try:
        job_amend(organization=job.organization, job_id=job.pk, changes=change)
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.info(request, "Changed; it keeps its place and waits for the next round.")
    return redirect("dashboard-job", job_id=job.pk)


def _on_labelled(request: HttpRequest, act: Callable, told: Callable[[list], str]
                 ) -> HttpResponse:
    """`act(organization, labels)` in each of the user's organizations on the label the
    form names, as the API's bulk calls do (a batch at a time); `told` the batches."""
    label = request.POST.get("label", "").strip()
    try:
        batches = [act(org, [label] if label else [])
                   for org in Organization.objects.filter(memberships__user=request.user)]
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        left = sum(batch.left for batch in batches)
        more = f"; {left} more match: ask again" if left else ""
        messages.info(request, f"{told(batches)}{more}.")
    return redirect(f"{reverse('dashboard')}?{urlencode({'label': label})}")


@login_required
@require_POST
def jobs_cancel_labelled_view(request: HttpRequest) -> HttpResponse:
    """Cancel the jobs with a label in each of the user's organizations."""
    return _on_labelled(
        request, lambda org, labels: jobs_cancel_labelled(organization=org, labels=labels),
        lambda batches: f"{sum(len(b.cancelled) for b in batches)} cancelled, "
                        f"{sum(len(b.stopping) for b in batches)} stopping on their nodes")


@login_required
@require_POST
def jobs_hold_labelled_view(request: HttpRequest) -> HttpResponse:
    """Hold, or release, the jobs with a label in each of the user's organizations."""
    releasing = request.POST.get("release") == "1"
    return _on_labelled(
        request, lambda org, labels: jobs_hold_labelled(organization=org, labels=labels,
                                                        release=releasing),
        lambda batches: f"{sum(len(b.done) for b in batches)} "
                        f"{'released' if releasing else 'held'}" + "".join(
                            f"; {b.refused.message}" for b in batches if b.refused) +
                        _stopping_said(batches))


@login_required
@require_POST
def jobs_erase_labelled_view(request: HttpRequest) -> HttpResponse:
    """Erase the ended jobs with a label in each of the user's organizations, once they
    ticked that they mean it (a user's data, by the label their client gave it)."""
    if request.POST.get("sure") != "1":
        messages.warning(request, "Nothing was erased: tick the box to say you mean it.")
        label = request.POST.get("label", "").strip()
        return redirect(f"{reverse('dashboard')}?{urlencode({'label': label})}")
    return _on_labelled(
        request, lambda org, labels: jobs_erase_labelled(organization=org, labels=labels,
                                                         user=request.user),
        lambda batches: f"{sum(len(b.erased) for b in batches)} erased, "
                        f"{sum(b.not_ended for b in batches)} not ended yet left as they are")


def _stopping_said(batches) -> str:
    stopping = sum(len(b.stopping) for b in batches)
    return f", {stopping} stopping at a checkpoint to be held" if stopping else ""


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
@require_POST
def job_erase_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """Erase the ended job's prompt, output and logs (services/erasure.py), once the member
    said they mean it: nothing brings them back."""
    job = _job_of_user(request, job_id)
    if request.POST.get("sure") != "1":
        messages.warning(request, "Nothing was erased: tick the box to say you mean it.")
        return redirect("dashboard-job", job_id=job.pk)
    try:
        job_erase(job=job, user=request.user)
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.info(request, "Erased: its prompt, params, output and logs are gone.")
    return redirect("dashboard-job", job_id=job.pk)


@login_required
@require_POST
def job_hold_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """Hold the job, or release the client's hold on it (services/job_hold.py)."""
    job = _job_of_user(request, job_id)
    releasing = request.POST.get("release") == "1"
    try:
        job = job_release(job=job) if releasing else job_hold(job=job)
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.info(request, _hold_said(job, releasing))
    return redirect("dashboard-job", job_id=job.pk)


def _hold_said(job: Job, releasing: bool) -> str:
    if job.state in LIVE:  # as the service left it
        return ("Released: it queues again once it stopped." if releasing else
                "Stopping at a checkpoint: then it stays out of the queue, reserving no "
                "credits, until released, and resumes from there.")
    return ("Released: it queues again, its wait counted from now." if releasing else
            "Held: it stays out of the queue, reserving no credits, until released.")


@login_required
def job_output(request: HttpRequest, job_id: int) -> HttpResponse:
    try:
        response = output_response(_job_of_user(request, job_id), request.headers)
    except ServiceError as exc:  # storage did not give it: the API's refusal, said plainly
        retry = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain",
                            headers=retry)
    if response is None:
        raise Http404("this job has no output")
    return response
