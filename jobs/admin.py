from django.contrib import admin, messages
from django.db import transaction
from django.utils.html import format_html_join

from credits.admin import HoldInline
from credits.admin_actions import grant_credits
from gpusched.admin_base import ChangedFieldsOnly, ReadOnly
from jobs.admin_actions import (
    cancel,
    change_time_limit,
    erase,
    hold,
    refund,
    release,
    requeue,
    resume,
    run_again,
    suspend,
)
from jobs.models import (
    ApiKey,
    Attempt,
    AttemptRank,
    Counter,
    GpuBinding,
    Invitation,
    Job,
    JobEvent,
    Membership,
    Organization,
    OrganizationEvent,
    Project,
    RunTimeStat,
    StoredCheckpoint,
    Tier,
    UsageAccount,
    WebhookDelivery,
    WebhookEndpoint,
)
from jobs.scheduler.positions import places_of
from jobs.services.amend import job_amend
from jobs.services.errors import ServiceError
from jobs.services.retention import retention_set
from jobs.services.submission import locked_organization
from jobs.transitions import AMENDABLE
from workers.services.logs import STREAMS, attempt_log

ADMIN_LOG_BYTES = 16384  # of each stream, on an attempt's page


@admin.register(Tier)
class TierAdmin(ChangedFieldsOnly):
    list_display = ["name", "priority", "weight", "guaranteed_share", "max_share",
                    "start_slo_seconds", "preemptible", "max_preemptions",
                    "max_queued_jobs_per_org", "shed_after_backlog_s", "api_requests_per_min",
                    "monthly_credits"]


@admin.register(Organization)
class OrganizationAdmin(ChangedFieldsOnly):
    list_display = ["slug", "name", "tier", "weight", "running_gpu_cap",
                    "low_credits_threshold", "erase_after_hours", "suspended_at",
                    "created_at"]
    list_filter = ["tier", ("suspended_at", admin.EmptyFieldListFilter)]
    search_fields = ["slug", "name"]
    readonly_fields = ["suspended_at", "suspended_reason"]
    actions = [grant_credits, suspend, resume]

    def save_model(self, request, obj, form, change) -> None:
        """Its retention through the service, as its owners set it: audited, under the
        organization's row lock."""
        if not change or "erase_after_hours" not in form.changed_data:
            return super().save_model(request, obj, form, change)
        form.changed_data.remove("erase_after_hours")
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            retention_set(locked_organization(obj), obj.erase_after_hours,
                          user=request.user)


@admin.register(Project)
class ProjectAdmin(ChangedFieldsOnly):
    list_display = ["name", "organization", "weight", "running_gpu_cap"]
    list_filter = ["organization__tier"]
    search_fields = ["name", "organization__slug"]


@admin.register(UsageAccount)
class UsageAccountAdmin(admin.ModelAdmin):
    """What fair share reads: written by the scheduler tick only."""

    list_display = ["project", "user", "gpu_seconds", "as_of"]
    list_select_related = ["project__organization", "user"]
    search_fields = ["project__name", "project__organization__slug", "user__username"]
    readonly_fields = ["project", "user", "gpu_seconds", "as_of"]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(RunTimeStat)
class RunTimeStatAdmin(admin.ModelAdmin):
    """What jobs without an estimate are planned by: written by the scheduler tick only."""

    list_display = ["project", "gpus", "runs", "expected_seconds", "updated_at"]
    list_select_related = ["project__organization"]
    search_fields = ["project__name", "project__organization__slug"]
    readonly_fields = ["project", "gpus", "runs", "mean_log", "var_log", "expected_seconds",
                       "updated_at"]

    @admin.display(description="expected run (s)")
    def expected_seconds(self, obj: RunTimeStat) -> str:
        expected = obj.expected_s()
        return "too few runs" if expected is None else f"{expected:.0f}"

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(Membership)
class MembershipAdmin(ChangedFieldsOnly):
    list_display = ["user", "organization", "role", "weight"]
    list_filter = ["role"]


@admin.register(ApiKey)
class ApiKeyAdmin(ChangedFieldsOnly):
    list_display = ["prefix", "name", "organization", "scope", "created_at", "last_used_at",
                    "expires_at", "revoked_at", "revoked_by"]
    list_filter = ["scope", "revoked_at"]
    readonly_fields = ["prefix", "key_hash", "created_at", "last_used_at", "revoked_by"]


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = ["at", "from_state", "to_state", "version", "reason", "attempt", "data"]


class AttemptInline(admin.TabularInline):
    model = Attempt
    fk_name = "job"
    extra = 0
    can_delete = False
    fields = ["token", "node", "gpu_indices", "status", "outcome", "exit_code", "failed_on",
              "started_at", "ended_at"]
    readonly_fields = fields


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "organization", "project", "state", "hold", "gpus", "created_at",
                    "started_at", "finished_at", "pending_code"]
    list_filter = ["state", "hold", "organization__tier", "gpus",
                   ("erased_at", admin.EmptyFieldListFilter)]
    search_fields = ["id", "prompt", "organization__slug"]
    inlines = [AttemptInline, HoldInline, JobEventInline]
    actions = [cancel, run_again, requeue, hold, release, change_time_limit, refund, erase]

    def get_readonly_fields(self, request, obj=None):
        """Every field but the request's, which change only while it waits, never having
        started, and then through the amend service (its credits held anew, its version
        compared): the state machine and the ledger own the rest."""
        derived = ["after", "place_in_line"]  # the jobs it runs after are set at submission
        if obj is None or obj.state != "QUEUED" or obj.attempts.exists():
            return [f.name for f in Job._meta.fields] + derived
        return [f.name for f in Job._meta.fields if f.name not in AMENDABLE] + derived

    def save_model(self, request, obj, form, change) -> None:
        changes = {name: form.cleaned_data[name] for name in form.changed_data
                   if name in AMENDABLE}
        if "gpu_types" in changes and changes["gpu_types"] is None:
            changes["gpu_types"] = []  # a box emptied: any type
        if not change or not changes:
            return
        try:
            job_amend(organization=obj.organization, job_id=obj.pk, changes=changes)
        except ServiceError as exc:
            self.message_user(request, f"Not changed: {exc.message}", level=messages.WARNING)

    def has_add_permission(self, request) -> bool:
        return False  # jobs come through submission: admission, credits, idempotency

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a job is its history and its credits' record: cancel it instead

    @admin.display(description="Place in line")
    def place_in_line(self, job: Job) -> str:
        """As the scheduler last drew the line (jobs/scheduler/positions.py)."""
        place = places_of([job]).get(job.pk)
        return place.words() if place else "-"


class AttemptRankInline(admin.TabularInline):
    """The further nodes of a gang spanning nodes; written by the node agents only."""

    model = AttemptRank
    extra = 0
    can_delete = False
    fields = ["rank", "node", "gpu_indices", "status", "outcome", "exit_code",
              "lease_expires_at", "started_at", "ended_at"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class StoredCheckpointInline(admin.TabularInline):
    """Copies of the attempt's checkpoints its job may resume from: one a node, made while
    it ran or at its stop; a gang's nodes also keep those of their last few steps."""

    model = StoredCheckpoint
    fk_name = "attempt"
    extra = 0
    can_delete = False
    fields = ["rank", "step", "taken_at", "name", "created_at"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Attempt)
class AttemptAdmin(ReadOnly):
    list_display = ["id", "job", "node", "token", "status", "outcome", "exit_code",
                    "lease_expires_at", "started_at", "ended_at"]
    list_filter = ["status", "outcome", "node"]
    inlines = [AttemptRankInline, StoredCheckpointInline]
    readonly_fields = ["printed"]

    @admin.display(description="what its binary printed (its first node's, the end)")
    def printed(self, attempt: Attempt) -> str:
        try:
            streams = [(stream, attempt_log(attempt.job, attempt_id=attempt.pk, stream=stream,
                                            tail=ADMIN_LOG_BYTES).data) for stream in STREAMS]
        except ServiceError as exc:  # its log expired
            return exc.message
        return format_html_join("", "<p>{}</p><pre>{}</pre>", (
            (stream, data.decode(errors="replace")) for stream, data in streams if data)
        ) or "nothing kept"


@admin.register(StoredCheckpoint)
class StoredCheckpointAdmin(ReadOnly):
    """Copies of attempts' checkpoints in storage, kept until no resume will read them
    (workers/services/checkpoints.py sweeps them)."""

    list_display = ["id", "job", "attempt", "rank", "step", "taken_at", "name", "created_at"]


@admin.register(AttemptRank)
class AttemptRankAdmin(ReadOnly):
    """What each node runs of gangs spanning nodes (rank 0 is the attempt's own node)."""

    list_display = ["id", "attempt", "rank", "node", "status", "outcome", "exit_code",
                    "lease_expires_at", "started_at", "ended_at"]
    list_filter = ["status", "node"]


@admin.register(JobEvent)
class JobEventAdmin(ReadOnly):
    """The audit trail: append-only."""

    list_display = ["id", "job", "from_state", "to_state", "version", "at", "reason"]
    list_filter = ["to_state"]


@admin.register(OrganizationEvent)
class OrganizationEventAdmin(ReadOnly):
    """What organizations' people changed in them, and who: append-only."""

    list_display = ["id", "organization", "at", "actor", "action", "detail"]
    list_filter = ["action"]
    list_select_related = ["organization", "user", "api_key"]
    search_fields = ["organization__slug", "action"]


@admin.register(Invitation)
class InvitationAdmin(ReadOnly):
    """Owners' invitation links (made and revoked on the team page; the token is hashed)."""

    list_display = ["id", "organization", "role", "created_by", "created_at", "expires_at",
                    "used_at", "used_by", "revoked_at"]
    list_select_related = ["organization", "created_by", "used_by"]
    search_fields = ["organization__slug"]
    exclude = ["token_hash"]


@admin.register(GpuBinding)
class GpuBindingAdmin(ReadOnly):
    list_display = ["gpu", "attempt", "bound_at", "released_at"]
    list_filter = ["released_at"]


@admin.register(Counter)
class CounterAdmin(ReadOnly):
    """The fencing-token counter on databases without sequences (SQLite demo): never set
    back, or a stale token could be handed out again."""

    list_display = ["name", "value"]


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ChangedFieldsOnly):
    list_display = ["organization", "url", "events", "active", "created_at"]
    list_filter = ["active"]
    readonly_fields = ["secret"]  # the receiver's copy; new endpoints get a fresh one


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnly):
    list_display = ["id", "job", "event", "endpoint", "status", "attempts", "next_attempt_at",
                    "last_error", "delivered_at"]
    list_filter = ["status", "event"]
