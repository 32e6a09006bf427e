from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.core.validators import URLValidator
from django.utils import timezone
from rest_framework import serializers

from jobs.models import (
    ApiKey,
    Attempt,
    Job,
    JobEvent,
    OrganizationEvent,
    WebhookDelivery,
    WebhookEndpoint,
)
from jobs.models.job import MAX_START_WITHIN_S, MAX_URGENCY_S
from jobs.models.webhook import EVENTS
from jobs.scheduler.positions import QueuePosition, places_of
from jobs.services.batches import MAX_BATCH
from jobs.services.dependencies import AFTER_MODES, MAX_AFTER, SUCCEEDED
from jobs.services.labels import MAX_LABELS, MAX_VALUE
from jobs.services.outputs import output_path
from jobs.services.placements import placements_of
from jobs.services.progress import progress_of
from jobs.services.relaxations import relaxation
from jobs.services.stops import stops_of
from jobs.services.submission import JobSpec
from jobs.states import LIVE, JobState
from workers.services.checkpoint_cuts import resume_point
from workers.services.retries import retry_budget


class TextOnly(serializers.CharField):
    """A string and nothing else: a number is refused, not kept as its digits."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class JobSubmitSerializer(serializers.Serializer):
    prompt = serializers.CharField(max_length=10_000)
    gpus = serializers.IntegerField(min_value=1, default=1)
    min_gpus = serializers.IntegerField(min_value=1, required=False, allow_null=True,
                                        default=None)
    params = serializers.DictField(required=False, default=dict)
    gpu_types = serializers.ListField(child=serializers.CharField(max_length=40),
                                      required=False, default=list, max_length=8)
    min_gpu_memory_mb = serializers.IntegerField(min_value=0, default=0)
    region = serializers.CharField(max_length=40, required=False, default="", allow_blank=True)
    time_limit_s = serializers.IntegerField(min_value=1, required=False)
    checkpointable = serializers.BooleanField(default=False)
    preemptible = serializers.BooleanField(default=True)
    project = serializers.SlugField(required=False, default="")
    urgency_s = serializers.IntegerField(min_value=0, max_value=MAX_URGENCY_S, default=0)
    max_retries = serializers.IntegerField(min_value=0, required=False, allow_null=True,
                                           default=None)
    after = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False,
                                  default=list, max_length=MAX_AFTER)
    after_mode = serializers.ChoiceField(
        choices=AFTER_MODES, default=SUCCEEDED,
        help_text="What the jobs it runs after must do first: succeed (the default; one that "
                  "does not cancels it) or end, however they end (Slurm's afterany).")
    start_within_s = serializers.IntegerField(
        min_value=1, max_value=MAX_START_WITHIN_S, required=False, allow_null=True,
        default=None, help_text="Cancel the job (error_code start_deadline_passed) if it has "
                                "not started this many seconds after its submission.")
    labels = serializers.DictField(
        child=TextOnly(max_length=MAX_VALUE, allow_blank=True, trim_whitespace=False),
        required=False, default=dict,
        help_text=f"Up to {MAX_LABELS} of the client's names for the job, key: value (a key "
                  "is 1 to 63 letters, digits, '_', '.' or '-'); found again with "
                  "GET /api/v1/jobs?label=key:value.")

    def validate_gpus(self, value: int) -> int:
        if value > settings.GPUSCHED_MAX_GPUS_PER_JOB:
            raise serializers.ValidationError(
                f"at most {settings.GPUSCHED_MAX_GPUS_PER_JOB} GPUs per job")
        return value

    def spec(self) -> JobSpec:
        """The validated request, as the submission service takes it."""
        return self.spec_of(self.validated_data)

    @staticmethod
    def spec_of(data: dict) -> JobSpec:
        return JobSpec(**{**data, "gpu_types": tuple(data["gpu_types"]),
                          "after": tuple(data["after"])})


class JobBatchItemSerializer(JobSubmitSerializer):
    after_batch = serializers.ListField(
        child=serializers.IntegerField(min_value=0), required=False, default=list,
        max_length=MAX_AFTER, help_text="Indices of earlier jobs of the batch (from 0) that "
                                        "this one runs after, as `after` names submitted jobs.")


class JobBatchSerializer(serializers.Serializer):
    jobs = JobBatchItemSerializer(many=True, allow_empty=False, max_length=MAX_BATCH,
                                  help_text=f"1 to {MAX_BATCH} jobs, each as POST "
                                            f"/api/v1/jobs takes one; submitted in this order.")

    def specs(self) -> list[JobSpec]:
        return [JobSubmitSerializer.spec_of({k: v for k, v in job.items() if k != "after_batch"})
                for job in self.validated_data["jobs"]]

    def after_batch(self) -> list[tuple[int, ...]]:
        return [tuple(job["after_batch"]) for job in self.validated_data["jobs"]]


class ProjectSerializer(serializers.Serializer):
    """A project as `POST /api/v1/projects` makes it, and the settings `PATCH` changes (those
    sent); their ranges, and the codes that refuse them, are the service's, as on the
    dashboard (jobs/services/projects.py)."""

    name = TextOnly(max_length=60)
    weight = serializers.FloatField(
        required=False, help_text="Its share of the organization's GPUs against its other "
                                  "projects' (1 by default).")
    running_gpu_cap = serializers.IntegerField(
        required=False, allow_null=True, help_text="GPUs its jobs may hold at once, inside "
                                                   "the organization's cap; null: no cap.")
    monthly_limit = serializers.IntegerField(
        required=False, allow_null=True, help_text="Credits its jobs may commit a calendar "
                                                   "month (UTC); null: no budget.")


class MemberSettingsSerializer(serializers.Serializer):
    """What `PATCH /api/v1/members/{username}` sets of a member (those sent); the ranges, and
    the codes that refuse them, are the service's, as on the dashboard
    (jobs/services/team.py)."""

    weight = serializers.FloatField(
        required=False, help_text="Their share of their projects' GPUs against the other "
                                  "members' (1 by default).")
    running_gpu_cap = serializers.IntegerField(
        required=False, allow_null=True, help_text="GPUs the jobs they send may hold at once "
                                                   "over all the organization's projects; "
                                                   "null: no cap of their own.")
    monthly_limit = serializers.IntegerField(
        required=False, allow_null=True, help_text="Credits the jobs they send may commit a "
                                                   "calendar month (UTC); null: no budget.")


class OrganizationSettingsSerializer(serializers.Serializer):
    """What an organization sets for itself (`PATCH /api/v1/organization`, those sent); the
    ranges, and the codes that refuse them, are the service's
    (credits/services/owner_settings.py)."""

    monthly_limit = serializers.IntegerField(
        required=False, allow_null=True, help_text="Credits the whole organization's jobs "
                                                   "may commit a calendar month (UTC); null: "
                                                   "no budget.")
    low_credits_threshold = serializers.IntegerField(
        required=False, help_text="Tell the webhooks (credits.low) when the available "
                                  "credits fall below this; 0: never.")
    erase_after_hours = serializers.IntegerField(
        required=False, allow_null=True, help_text="Erase each ended job's prompt, params, "
                                                   "output and logs this many hours after "
                                                   "it ends (1 to 8,784); null: never.")


class JobSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.name")
    organization = serializers.CharField(source="organization.slug")
    pending = serializers.SerializerMethodField()
    placement = serializers.SerializerMethodField()
    checkpoint = serializers.SerializerMethodField()
    output_url = serializers.SerializerMethodField()
    retry_at = serializers.SerializerMethodField()
    max_retries = serializers.SerializerMethodField()
    after = serializers.SerializerMethodField()
    hold = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    stopping = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id", "organization", "project", "state", "hold", "version", "prompt", "params",
            "labels", "gpus", "min_gpus", "gpu_types", "min_gpu_memory_mb", "region",
            "time_limit_s", "checkpointable", "preemptible", "created_at", "started_at",
            "finished_at", "start_by", "urgency_s", "after", "after_mode", "preemptions",
            "retries",
            "max_retries", "retry_at", "pending", "placement", "progress", "stopping",
            "checkpoint", "result", "output_url", "error_code", "error", "erased_at",
        ]

    def get_hold(self, job: Job) -> str | None:
        return job.hold or None

    def get_after(self, job: Job) -> list[int]:
        return sorted(other.pk for other in job.after.all())  # prefetched in a list

    def get_pending(self, job: Job) -> dict | None:
        if job.state == JobState.HELD:
            return {"code": job.pending_code, "reason": job.pending_reason,
                    "estimated_start": None, "what_if": "", "relaxation": None,
                    "position": None, "misses_start_deadline": False}
        if job.state != "QUEUED":
            return None
        positions = self.context.get("positions")  # a page's, read at once
        if positions is None:
            positions = places_of([job])
        return {"code": job.pending_code, "reason": job.pending_reason,
                "estimated_start": job.estimated_start, "what_if": job.pending_what_if,
                "relaxation": relaxation(job.pending_what_if, job.gpu_types),
                "position": position_body(positions.get(job.pk)),
                # the client may act before the deadline cancels it: relax it, or go elsewhere
                "misses_start_deadline": bool(job.start_by and job.estimated_start
                                              and job.estimated_start > job.start_by)}

    def get_max_retries(self, job: Job) -> int:
        return retry_budget(job)

    def get_retry_at(self, job: Job) -> datetime | None:
        return job.retry_at if job.state == JobState.RETRY_WAIT else None

    def get_placement(self, job: Job) -> list[dict] | None:
        if job.state not in LIVE:
            return None
        placements = self.context.get("placements")  # a page's, read at once
        if placements is None:
            placements = placements_of([job.pk])
        return placements.get(job.pk)

    def get_progress(self, job: Job) -> dict | None:
        if job.state not in LIVE:
            return None
        progress = self.context.get("progress")  # a page's, read at once
        if progress is None:
            progress = progress_of([job], timezone.now())
        return progress.get(job.pk)

    def get_stopping(self, job: Job) -> dict | None:
        """While its node stops it: `{for, deadline}` (cancel, preempt or hold; when the
        binary is killed if it has not stopped by then)."""
        if job.state not in LIVE:
            return None
        stops = self.context.get("stops")  # a page's, read at once
        stop = (stops_of([job.pk]) if stops is None else stops).get(job.pk)
        if stop is None:
            return None
        deadline = None if stop[1] is None else _TIME.to_representation(stop[1])
        return {"for": stop[0], "deadline": deadline}

    def get_checkpoint(self, job: Job) -> dict | None:
        """What a retry of the job would resume from now (checkpoint_cuts.resume_points)."""
        points = self.context.get("checkpoints")  # a page's, read at once
        point = resume_point(job) if points is None else points.get(job.pk)
        if point is None:
            return None
        taken = point["taken_at"]
        return {**point, "taken_at": None if taken is None else _TIME.to_representation(taken)}

    def get_output_url(self, job: Job) -> str | None:
        return output_path(job)


_TIME = serializers.DateTimeField()  # the API's one way of writing a time


def position_body(position: QueuePosition | None) -> dict | None:
    """`{place, of, ahead_s, as_of}`, or None until the job is first in a published line."""
    if position is None:
        return None
    ahead = None if position.ahead_s is None else round(position.ahead_s)
    return {"place": position.position, "of": position.length, "ahead_s": ahead,
            "as_of": _TIME.to_representation(datetime.fromtimestamp(position.at, tz=UTC))}


class JobEventSerializer(serializers.ModelSerializer):
    """One entry of a job's history: a move of its state, or a change of its request."""

    class Meta:
        model = JobEvent
        fields = ["id", "at", "from_state", "to_state", "version", "reason", "attempt", "data"]


class AttemptSerializer(serializers.ModelSerializer):
    """One try of a job, as its organization reads it: where it ran, how it ended, and what
    its binary last wrote to stderr (why it crashed)."""

    nodes = serializers.SerializerMethodField()
    log_url = serializers.SerializerMethodField()

    class Meta:
        model = Attempt
        fields = ["id", "nodes", "created_at", "started_at", "ended_at", "progress", "outcome",
                  "exit_code", "stderr_tail", "log_url"]

    def get_log_url(self, attempt: Attempt) -> str | None:
        """Where what it printed is read, while kept (`?stream=stderr`, `?rank=`, `?tail=`)."""
        return f"/api/v1/jobs/{attempt.job_id}/attempts/{attempt.pk}/log" if (
            attempt.log_kept) else None

    def get_nodes(self, attempt: Attempt) -> list[dict]:
        ranks = sorted(attempt.ranks.all(), key=lambda r: r.rank)  # prefetched
        return [{"rank": 0, "node": attempt.node.name, "gpus": attempt.gpu_indices},
                *({"rank": r.rank, "node": r.node.name, "gpus": r.gpu_indices} for r in ranks)]


class WebhookEndpointSerializer(serializers.ModelSerializer):
    # URLField would check the URL a second time, with its own schemes, and say so twice
    url = serializers.CharField(max_length=500,
                                validators=[URLValidator(schemes=["http", "https"])])

    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENTS),
                                   required=False, allow_empty=False, max_length=len(EVENTS),
                                   help_text="Default: the job's end (every terminal state).")

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "url", "events", "active", "created_at"]
        read_only_fields = ["id", "active", "created_at"]

    def validate_events(self, events: list[str]) -> list[str]:
        return sorted(set(events), key=EVENTS.index)


class ApiKeySerializer(serializers.ModelSerializer):
    """A key as the organization's own tools audit it: never its secret, nor its hash."""

    prefix = serializers.SerializerMethodField()
    user = serializers.SerializerMethodField()
    live = serializers.SerializerMethodField()

    class Meta:
        model = ApiKey
        fields = ["id", "prefix", "name", "scope", "user", "created_at", "last_used_at",
                  "expires_at", "revoked_at", "live"]

    def get_prefix(self, key: ApiKey) -> str:
        return f"{key.prefix}…"

    def get_user(self, key: ApiKey) -> str | None:
        return key.user.get_username() if key.user else None

    def get_live(self, key: ApiKey) -> bool:
        return key.revoked_at is None and (key.expires_at is None
                                           or key.expires_at > self.context["now"])


class OrganizationEventSerializer(serializers.ModelSerializer):
    by = serializers.CharField(source="actor")

    class Meta:
        model = OrganizationEvent
        fields = ["id", "at", "by", "action", "detail"]


class WebhookDeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookDelivery
        fields = ["id", "event", "job", "status", "attempts", "last_error", "created_at",
                  "next_attempt_at", "delivered_at"]
