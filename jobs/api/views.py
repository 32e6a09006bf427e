"""The calls about jobs and their logs and outputs, the queue line, the fleet's GPU types,
and the API's own document (the organization's: organization_views.py; webhooks:
webhook_views.py)."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils import timezone
from rest_framework import permissions, status
from rest_framework.response import Response
from rest_framework.views import APIView

from credits.services.holds import job_credits
from jobs.api.errors import gone, not_found
from jobs.api.openapi import openapi_document
from jobs.api.paging import PageQuery, page_of
from jobs.api.queries import JobListQuery, LabelledQuery, LineQuery, LogQuery, SummaryQuery
from jobs.api.serializers import (
    AttemptSerializer,
    JobBatchSerializer,
    JobEventSerializer,
    JobSerializer,
    JobSubmitSerializer,
    position_body,
)
from jobs.models import ApiKey, Job
from jobs.scheduler.backlog import backlog_seconds
from jobs.scheduler.positions import in_line, places_of
from jobs.services.amend import job_amend
from jobs.services.batches import jobs_submit_batch
from jobs.services.cancellation import job_cancel, jobs_cancel_labelled
from jobs.services.catalog import gpu_catalog
from jobs.services.erasure import erased, job_erase, jobs_erase_labelled
from jobs.services.errors import ValidationFailed
from jobs.services.job_hold import job_hold, job_release, jobs_hold_labelled
from jobs.services.labels import with_labels
from jobs.services.outputs import output_expired, output_response
from jobs.services.placements import placements_of
from jobs.services.preview import job_submit_preview
from jobs.services.progress import progress_of
from jobs.services.stops import stops_of
from jobs.services.submission import job_submit_once
from jobs.services.summaries import jobs_summary
from jobs.services.time_limits import job_set_time_limit
from jobs.states import LIVE
from workers.services.checkpoint_cuts import may_resume, resume_points
from workers.services.logs import attempt_log


def _idempotency_key(request) -> str:
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > 255:
        raise ValidationFailed("Idempotency-Key must be at most 255 characters",
                               code="invalid_idempotency_key")
    return key


def _dry_run(request) -> bool:
    value = request.query_params.get("dry_run", "false").lower()
    if value not in ("true", "1", "false", "0"):
        raise ValidationFailed("dry_run is true or false", code="invalid", field="dry_run")
    return value in ("true", "1")


def _jobs_of(request):
    return Job.objects.filter(organization=request.user.organization).select_related(
        "organization", "project")


def _made(job: Job) -> dict:
    return {"id": job.pk, "state": job.state, "url": f"/api/v1/jobs/{job.pk}"}


def _rounded(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds)


def _accepted(request, body: dict, replayed: bool) -> Response:
    """202 with what a submission made and its tier's backlog as of the last round; a
    repeated request gets what the first one made, in the state it is in now."""
    backlog = backlog_seconds(request.user.organization.tier.name)
    return Response({**body, "backlog_s": _rounded(backlog)}, status=status.HTTP_202_ACCEPTED,
                    headers={"Idempotent-Replayed": "true"} if replayed else None)


class JobListCreate(APIView):
    write_scope = ApiKey.Scope.JOBS

    def post(self, request):
        key = _idempotency_key(request)
        body = JobSubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if _dry_run(request):  # what it would do, nothing kept
            preview = job_submit_preview(organization=request.user.organization,
                                         spec=body.spec(), user=request.user.user)
            return Response({"dry_run": True, "state": preview.state,
                             "credits": {"hold": preview.hold,
                                         "available_after": preview.available_after},
                             "backlog_s": _rounded(preview.backlog_s)})
        job, replayed = job_submit_once(organization=request.user.organization,
                                        spec=body.spec(), user=request.user.user,
                                        idempotency_key=key)
        return _accepted(request, _made(job), replayed)

    def get(self, request):
        """Newest first, a page at a time: `?id=` (up to 100 of them), `?state=`,
        `?project=`, `?label=key:value` (each of them), `?limit=` (1–500, 100 by default) and
        `?before=<id>`, the cursor that `next` carries."""
        query = JobListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        jobs = _jobs_of(request).prefetch_related("after").order_by("-pk")
        if query.validated_data.get("id"):
            jobs = jobs.filter(pk__in=query.validated_data["id"])
        if "state" in query.validated_data:
            jobs = jobs.filter(state=query.validated_data["state"])
        if "project" in query.validated_data:
            jobs = jobs.filter(project__name=query.validated_data["project"])
        jobs = with_labels(jobs, query.validated_data.get("label", []))
        page, following = page_of(jobs, query.validated_data, request, "/api/v1/jobs")
        live = [job.pk for job in page if job.state in LIVE]
        ran = [job.pk for job in page if may_resume(job)]
        serialized = JobSerializer(page, many=True, context={
            "positions": places_of(page), "placements": placements_of(live),
            "stops": stops_of(live),
            "progress": progress_of(page, timezone.now()),
            "checkpoints": resume_points(ran)})
        return Response({"results": serialized.data, "next": following})


class JobsSummary(APIView):
    """GET: how many of the organization's jobs are in each state, the GPUs they hold, the
    GPU-hours they ran and their credits; `?label=` (each of them) and `?project=` narrow
    them to a batch or an experiment."""

    def get(self, request):
        query = SummaryQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        jobs = with_labels(_jobs_of(request), query.validated_data.get("label", []))
        if "project" in query.validated_data:
            jobs = jobs.filter(project__name=query.validated_data["project"])
        return Response(jobs_summary(jobs, timezone.now()))


class GpuTypes(APIView):
    """GET: each GPU type of the fleet, its GPUs (all, and taking work now), the most on one
    node, memory, regions and price (null: free)."""

    def get(self, request):
        return Response({"results": gpu_catalog(timezone.now(),
                                                [request.user.organization.pk])})


class QueueLine(APIView):
    """GET: the organization's waiting jobs in the order the scheduler's last line puts them,
    first in line first, `?limit=` of them (1–500, 100 by default)."""

    def get(self, request):
        query = LineQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        waiting = dict(_jobs_of(request).filter(state="QUEUED").values_list("pk", "gpus"))
        line = [(job_id, position_body(place)) for job_id, place in in_line(waiting)]
        head = line[0][1] if line else {"of": None, "as_of": None}
        return Response({
            "of": head["of"], "as_of": head["as_of"], "waiting": len(waiting),
            "in_line": len(line),
            "results": [{"id": job_id, "gpus": waiting[job_id], "place": body["place"],
                         "ahead_s": body["ahead_s"]}
                        for job_id, body in line[:query.validated_data["limit"]]]})


class JobCancel(APIView):
    write_scope = ApiKey.Scope.JOBS

    def post(self, request, job_id: int):
        job = _jobs_of(request).filter(pk=job_id).first()
        if job is None:
            return not_found()
        job = job_cancel(job=job)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class JobErase(APIView):
    """POST: erase the ended job's prompt, params, output, logs and checkpoints; its row,
    history and credits stay."""

    write_scope = ApiKey.Scope.JOBS

    def post(self, request, job_id: int):
        job = _jobs_of(request).filter(pk=job_id).first()
        if job is None:
            return not_found()
        job = job_erase(job=job, user=request.user.user, api_key=request.auth)
        return Response({**JobSerializer(job).data, "credits": job_credits(job)})


class JobsErase(APIView):
    """POST {"label": ["key:value", ...]}: erase the organization's ended jobs that carry
    each label, a batch at a time (`left`: how many more; `not_ended`: those still live)."""

    write_scope = ApiKey.Scope.JOBS

    def post(self, request):
        body = LabelledQuery(data=request.data)
        body.is_valid(raise_exception=True)
        done = jobs_erase_labelled(organization=request.user.organization,
                                   labels=body.validated_data["label"],
                                   user=request.user.user, api_key=request.auth)
        return Response({"erased": done.erased, "left": done.left,
                         "not_ended": done.not_ended})


class JobBatch(APIView):
    """POST {"jobs": [...]}: submit up to 100 jobs at once, all or none."""

    write_scope = ApiKey.Scope.JOBS

    def post(self, request):
        key = _idempotency_key(request)
        body = JobBatchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        org = request.user.organization
        jobs, replayed = jobs_submit_batch(organization=org, specs=body.specs(),
                                           after_batch=body.after_batch(),
                                           user=request.user.user, idempotency_key=key)
        return _accepted(request, {"jobs": [_made(job) for job in jobs]}, replayed)


class JobHold(APIView):
    """POST: hold the job out of the queue until the client releases it; a running one is
    stopped at a checkpoint first (202 while it stops)."""

    write_scope = ApiKey.Scope.JOBS
    act = staticmethod(job_hold)

    def post(self, request, job_id: int):
        job = _jobs_of(request).filter(pk=job_id).first()
        if job is None:
            return not_found()
        job = self.act(job=job)
        stopping = job.state in LIVE  # what was asked happens once its node stopped it
        return Response(JobSerializer(job).data,
                        status=status.HTTP_202_ACCEPTED if stopping else status.HTTP_200_OK)


class JobRelease(JobHold):
    """POST: release the client's hold: the job queues again, its wait counted from now."""

    act = staticmethod(job_release)


class JobsCancel(APIView):
    """POST {"label": ["key:value", ...]}: cancel the organization's jobs that have not
    ended and carry each label, a batch at a time (`left`: how many more match)."""

    write_scope = ApiKey.Scope.JOBS

    def post(self, request):
        body = LabelledQuery(data=request.data)
        body.is_valid(raise_exception=True)
        done = jobs_cancel_labelled(organization=request.user.organization,
                                    labels=body.validated_data["label"])
        return Response({"cancelled": done.cancelled, "stopping": done.stopping,
                         "left": done.left}, status=status.HTTP_202_ACCEPTED)


class JobsHold(APIView):
    """POST {"label": ["key:value", ...]}: hold the organization's jobs that carry each
    label, waiting ones now and running ones that checkpoint once they stopped (`stopping`),
    a batch at a time (`left`: how many more match)."""

    write_scope = ApiKey.Scope.JOBS
    release = False

    def post(self, request):
        body = LabelledQuery(data=request.data)
        body.is_valid(raise_exception=True)
        done = jobs_hold_labelled(organization=request.user.organization,
                                  labels=body.validated_data["label"], release=self.release)
        answer = {"released" if self.release else "held": done.done, "left": done.left}
        if not self.release:
            answer["stopping"] = done.stopping
        if self.release:  # the release the credits no longer covered, which stopped it
            answer["refused"] = done.refused and {
                "code": done.refused.code, "message": done.refused.message,
                **getattr(done.refused, "details", {})}
        return Response(answer)


class JobsRelease(JobsHold):
    """POST {"label": [...]}: release the client's holds on the jobs that carry each label."""

    release = True


class JobDetail(APIView):
    write_scope = ApiKey.Scope.JOBS

    def get(self, request, job_id: int):
        job = _jobs_of(request).filter(pk=job_id).first()
        if job is None:  # another organization's job is indistinguishable from none
            return not_found()
        return Response({**JobSerializer(job).data, "credits": job_credits(job)})

    def patch(self, request, job_id: int):
        """Change a waiting job's request (services/amend.py): the fields sent, no others; a
        started job's time limit alone, shorter (services/time_limits.py)."""
        body = JobSubmitSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        unknown = set(request.data) - set(body.fields) if isinstance(request.data, dict) else ()
        changes = {**dict.fromkeys(unknown), **body.validated_data}
        if set(changes) == {"time_limit_s"} and changes["time_limit_s"] is not None:
            job = _jobs_of(request).filter(pk=job_id).first()  # a running job's too
            if job is None:
                return not_found()
            job = job_set_time_limit(job=job, time_limit_s=changes["time_limit_s"],
                                     by="the client")
        else:
            job = job_amend(organization=request.user.organization, job_id=job_id,
                            changes=changes)
        job = _jobs_of(request).get(pk=job.pk)
        return Response({**JobSerializer(job).data, "credits": job_credits(job)})


class JobAttempts(APIView):
    """GET: the job's tries, newest first: where each ran, how it ended, its stderr's end."""

    def get(self, request, job_id: int):
        job = _jobs_of(request).filter(pk=job_id).first()
        if job is None:
            return not_found()
        attempts = job.attempts.select_related("node").prefetch_related(
            "ranks__node").order_by("-pk")
        return Response({"results": AttemptSerializer(attempts, many=True).data})


class JobEvents(APIView):
    """GET: the job's history, newest first, a page at a time (`?limit=`, `?before=`)."""

    def get(self, request, job_id: int):
        job = _jobs_of(request).filter(pk=job_id).first()
        if job is None:
            return not_found()
        query = PageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        page, following = page_of(job.events.order_by("-pk"), query.validated_data, request,
                                  f"/api/v1/jobs/{job.pk}/events")
        return Response({"results": JobEventSerializer(page, many=True).data,
                         "next": following})


class JobLog(APIView):
    """GET: what a try's binary printed, as text: the latest try's unless one is named, its
    first node's stdout unless `?rank=` or `?stream=stderr`; `?tail=` bytes for the end only.
    X-Log-Final says whether its try has ended (nothing more will come)."""

    def get(self, request, job_id: int, attempt_id: int | None = None):
        job = _jobs_of(request).filter(pk=job_id).first()
        if job is None:
            return not_found()
        query = LogQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        text = attempt_log(job, attempt_id=attempt_id, **query.validated_data)
        return HttpResponse(text.data, content_type="text/plain; charset=utf-8", headers={
            "X-Attempt-Id": str(text.attempt_id), "X-Log-Final": str(text.final).lower()})


class JobOutput(APIView):
    """GET: the job's output file, to its own organization only."""

    def get(self, request, job_id: int):
        job = _jobs_of(request).filter(pk=job_id).first()
        if job is not None and (refusal := erased(job)):
            raise refusal
        expired = output_expired(job) if job is not None else None
        if expired:
            return gone("output_expired", expired)
        response = output_response(job, request.headers) if job is not None else None
        return response or not_found("no such job, or it has no output")


class OpenApiDocument(APIView):
    """The API described as OpenAPI 3.1 (jobs/api/openapi.py); readable without a key."""

    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]
    throttle_classes: list = []

    def get(self, request):
        return Response(openapi_document())
