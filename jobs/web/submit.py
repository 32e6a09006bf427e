"""The dashboard's "New job" page: a member submits a job of an organization as the API would
take it (the same validation, admission, credit hold and fair share by submitter), or sends
an earlier job again with its request filled in. Each form carries a one-time token, its
Idempotency-Key: a double click, or a POST the browser or a proxy sends again, makes one job
(a form loaded anew is a new form)."""

from __future__ import annotations

import json
import re
import secrets

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils import timezone

from jobs.api.serializers import JobSubmitSerializer
from jobs.models import Job, Organization
from jobs.services.catalog import gpu_catalog
from jobs.services.errors import ServiceError
from jobs.services.preview import Preview, job_submit_preview
from jobs.services.submission import JobSpec, job_submit_once, spec_of
from jobs.web.access import organizations_with_projects, project_targets
from jobs.web.numbers import whole_number

TOKEN = re.compile(r"[A-Za-z0-9_-]{16,64}")
# the organization's Idempotency-Keys are shared with its API clients: a prefix of its own
KEY_PREFIX = "dashboard:"
# fields of a request the form shows, in its order; `after` is the API's alone
TEXT_FIELDS = ("prompt", "gpus", "min_gpus", "gpu_types", "time_limit_s", "min_gpu_memory_mb",
               "region", "urgency_s", "max_retries", "start_within_s")
FLAGS = ("checkpointable", "preemptible")
ZERO_DEFAULTS = {"min_gpu_memory_mb": (0,), "urgency_s": (0,)}
# what the page calls each field a refusal names
FIELD_NAMES = {"target": "Organization / project", "prompt": "Prompt", "gpus": "GPUs",
               "min_gpus": "Accepts as few as", "gpu_types": "GPU types",
               "time_limit_s": "Time limit", "min_gpu_memory_mb": "GPU memory",
               "region": "Region", "urgency_s": "Ahead of my own jobs by",
               "max_retries": "Retries", "start_within_s": "Give up unless started within",
               "params": "Parameters", "labels": "Labels",
               "checkpointable": "Writes checkpoints", "preemptible": "May be preempted"}

# a refusal the form says in its own words
REFUSAL_WORDS = {"idempotency_key_reused": "this form was sent before with other values; it "
                                           "is ready to send as a new job"}


class FormRefused(Exception):
    """A field the form's text cannot turn into a request: (field, message)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field, self.message = field, message


def _organizations(request: HttpRequest) -> QuerySet[Organization]:
    return Organization.objects.filter(memberships__user=request.user).order_by("slug")


def _values_of(job: Job) -> dict:
    """What the form shows to send `job` again: its request, as text."""
    spec = spec_of(job)
    # a default shows as a blank field, as on a new form (0 retries is no default)
    values = {name: "" if getattr(spec, name) in (None, *ZERO_DEFAULTS.get(name, ()))
              else str(getattr(spec, name)) for name in TEXT_FIELDS}
    values.update(
        target=f"{job.organization.slug}/{job.project.name}",
        gpu_types=", ".join(spec.gpu_types),
        params=json.dumps(spec.params, indent=2, ensure_ascii=False) if spec.params else "",
        labels="\n".join(f"{key}: {value}" for key, value in spec.labels.items()),
        **{flag: getattr(spec, flag) for flag in FLAGS})
    return values


def _blank() -> dict:
    return {name: "" for name in TEXT_FIELDS} | {
        "gpus": "1", "params": "", "labels": "", "target": "",
        "checkpointable": False, "preemptible": True}


def _page(request: HttpRequest, values: dict, errors: dict | None = None,
          status: int = 200, preview: Preview | None = None) -> HttpResponse:
    mine = _organizations(request).values_list("pk", flat=True)
    catalog = [t for t in gpu_catalog(timezone.now(), set(mine)) if t["gpus"]]
    gpu_types = [t["gpu_type"] for t in catalog]
    refusals = [(FIELD_NAMES.get(field, ""), message)
                for field, message in (errors or {}).items()]
    return render(request, "dashboard/job_new.html", {
        "values": values, "errors": refusals,
        "targets": project_targets(organizations_with_projects(request)),
        "gpu_types": gpu_types, "catalog": catalog,
        "max_gpus": settings.GPUSCHED_MAX_GPUS_PER_JOB,
        "token": secrets.token_urlsafe(24), "preview": preview}, status=status)


def _labels(text: str) -> dict:
    labels = {}
    for line in filter(None, (line.strip() for line in text.splitlines())):
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            raise FormRefused("labels", f"{line!r} is not key: value")
        labels[key.strip()] = value.strip()
    return labels


def _params(text: str) -> dict:
    if not text.strip():
        return {}
    try:
        params = json.loads(text)
    except ValueError as exc:
        raise FormRefused("params", f"not JSON: {exc}") from None
    if not isinstance(params, dict):
        raise FormRefused("params", "must be a JSON object, {...}")
    return params


def _body(form: QueryDict) -> dict:
    """The API's request body that the form's fields say, blanks left to their defaults."""
    body: dict = {name: form[name].strip() for name in TEXT_FIELDS
                  if form.get(name, "").strip()}
    body["prompt"] = form.get("prompt", "")
    body["gpu_types"] = [t for t in re.split(r"[\s,]+", form.get("gpu_types", "")) if t]
    body["params"] = _params(form.get("params", ""))
    body["labels"] = _labels(form.get("labels", ""))
    body.update({flag: flag in form for flag in FLAGS})  # an unchecked box is not sent
    return body


def _target(request: HttpRequest, text: str) -> tuple[Organization, str]:
    slug, _, project = text.partition("/")
    org = _organizations(request).filter(slug=slug).first()
    if org is None:  # another organization is indistinguishable from none
        raise FormRefused("target", "choose one of your organizations' projects")
    return org, project


def _spec(request: HttpRequest, form: QueryDict) -> tuple[Organization, JobSpec]:
    org, project = _target(request, form.get("target", ""))
    serializer = JobSubmitSerializer(data={**_body(form), "project": project})
    if not serializer.is_valid():
        field, problems = next(iter(serializer.errors.items()))
        raise FormRefused(field, _words(problems))
    return org, serializer.spec()


def _words(problems) -> str:
    """DRF's error detail (a list, or a dict of them for a nested field), as one line."""
    if isinstance(problems, dict):
        return "; ".join(f"{key}: {_words(value)}" for key, value in problems.items())
    return " ".join(str(problem) for problem in problems)


def _values_sent(form: QueryDict) -> dict:
    return {**{name: form.get(name, "") for name in (*TEXT_FIELDS, "params", "labels",
                                                        "target")},
            **{flag: flag in form for flag in FLAGS}}


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    """GET: the form, blank or (`?from=<job id>`) filled with an earlier job's request.
    POST: submit it, or with `check` say what submitting it would do; a refusal shows the
    form again as sent, with the refusal's status."""
    if request.method != "POST":
        return _page(request, _form_from(request))
    form = request.POST
    token = form.get("token", "")
    if not TOKEN.fullmatch(token):
        return _page(request, _values_sent(form), {"form": "this form is out of date: "
                                                    "send it again"}, status=400)
    try:
        org, spec = _spec(request, form)
        if "check" in form:  # what it would do, nothing kept: the form stays to send
            preview = job_submit_preview(organization=org, spec=spec, user=request.user)
            return _page(request, _values_sent(form), preview=preview)
        job, replayed = job_submit_once(organization=org, spec=spec, user=request.user,
                                        idempotency_key=KEY_PREFIX + token,
                                        reason=f"submitted on the dashboard by "
                                               f"{request.user.get_username()}")
    except FormRefused as exc:
        return _page(request, _values_sent(form), {exc.field: exc.message}, status=400)
    except ServiceError as exc:  # admission, credits, budgets, the token used before
        field = "target" if exc.field == "project" else exc.field or "form"
        return _page(request, _values_sent(form), {field: REFUSAL_WORDS.get(
            exc.code, exc.message)}, status=exc.status)
    messages.info(request, f"This form was sent already: it made job #{job.pk}." if replayed
                  else f"Submitted as job #{job.pk}.")
    return redirect("dashboard-job", job_id=job.pk)


def _form_from(request: HttpRequest) -> dict:
    earlier = request.GET.get("from", "")
    if not earlier:
        return _blank()
    job_id = whole_number(earlier)
    job = (Job.objects.filter(pk=job_id, organization__memberships__user=request.user)
           .select_related("organization", "project").first() if job_id is not None else None)
    if job is None or job.erased_at:
        raise Http404("no such job, or its request was erased")
    return _values_of(job)

