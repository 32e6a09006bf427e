"""A job (what a client asked for) and its append-only event log."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from jobs.states import TERMINAL, JobState

MAX_URGENCY_S = 86_400  # the most a job may go ahead of its user's own: the wait bound's term
MAX_START_WITHIN_S = 30 * 86_400  # the longest start deadline a client may set


class Job(models.Model):
    organization = models.ForeignKey("jobs.Organization", on_delete=models.PROTECT,
                                     related_name="jobs")
    project = models.ForeignKey("jobs.Project", on_delete=models.PROTECT, related_name="jobs")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                     on_delete=models.SET_NULL)
    # spec
    prompt = models.TextField()
    params = models.JSONField(default=dict, blank=True)
    # the client's own names for the job ({key: value}, jobs/services/labels.py): its
    # request id, its pipeline, found again with `GET /api/v1/jobs?label=key:value`
    labels = models.JSONField(default=dict, blank=True)
    gpus = models.PositiveSmallIntegerField()
    # the fewest GPUs the job would accept: the scheduler says when that many would start it
    # sooner (the pending what-if); it runs on `gpus`
    min_gpus = models.PositiveSmallIntegerField(null=True, blank=True)
    gpu_types = models.JSONField(default=list, blank=True, help_text="Preference order.")
    min_gpu_memory_mb = models.PositiveIntegerField(default=0)
    region = models.CharField(max_length=40, blank=True)
    time_limit_s = models.PositiveIntegerField()
    checkpointable = models.BooleanField(default=False)
    preemptible = models.BooleanField(default=True)
    # goes ahead of its submitter's own jobs in its project as if submitted this many seconds
    # earlier (jobs/policy/deadlines.py); never ahead of anyone else's
    urgency_s = models.PositiveIntegerField(default=0)
    # jobs of its organization that must succeed before it may queue (HELD until then)
    after = models.ManyToManyField("self", symmetrical=False, related_name="dependents",
                                   blank=True)
    # what the jobs it runs after must do first: succeed (Slurm's afterok), or end however
    # they end (afterany: a step that gathers what a batch made, failures and all)
    after_mode = models.CharField(max_length=10, default="succeeded", choices=[
        ("succeeded", "succeeded"), ("ended", "ended")])
    # life
    state = models.CharField(max_length=12, choices=JobState.choices, default=JobState.QUEUED)
    # who keeps it HELD out of the queue until they release it (jobs/services/job_hold.py),
    # besides any jobs it runs after; an operator's hold is not the client's to release.
    # Set on a PREEMPTING job too: held as it ran, it goes HELD, not QUEUED, once it stopped
    hold = models.CharField(max_length=10, choices=[("client", "client"),
                                                     ("operator", "operator")], blank=True)
    version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    enqueued_at = models.DateTimeField(help_text="Start of the current wait (aging anchor).")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    preemptions = models.PositiveSmallIntegerField(default=0)
    retries = models.PositiveSmallIntegerField(
        default=0, help_text="Retries so far, after lost or failed attempts.")
    # the retries it may have, at most the service's; null: the service's
    # (GPUSCHED_MAX_RETRIES, as it is when one is needed)
    max_retries = models.PositiveSmallIntegerField(null=True, blank=True)
    retry_at = models.DateTimeField(null=True, blank=True, help_text="End of RETRY_WAIT.")
    start_by = models.DateTimeField(
        null=True, blank=True,
        help_text="Cancelled if it has not started by then (the client's start_within_s).")
    # the node its last try failed on (a crash, a hang): its retry goes elsewhere where it
    # can start as soon (a bad GPU there would fail it again). Its attempts say it too, but
    # the scheduler's queue reads only the jobs' own rows (scheduler/queue_cache.py)
    avoid_node = models.CharField(max_length=63, blank=True)
    # outcome
    output = models.FileField(upload_to="outputs/%Y/%m/%d/", blank=True)
    result = models.JSONField(default=dict, blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    # when its prompt, params, output, logs and checkpoints were erased at its client's or an
    # operator's request (jobs/services/erasure.py); its row, history and credits stay
    erased_at = models.DateTimeField(null=True, blank=True)
    # why it waits (written by the scheduler tick)
    pending_code = models.CharField(max_length=40, blank=True)
    pending_reason = models.TextField(blank=True)
    # a relaxation that would start it sooner, e.g. "would start now on A100 if ..."
    pending_what_if = models.TextField(blank=True)
    estimated_start = models.DateTimeField(null=True, blank=True)
    # GPUs that preemption is freeing for this job, meaningful while it is QUEUED: the tick
    # binds them to it once its victims let go, and places nothing else on them before
    nominated_node = models.ForeignKey("workers.Node", null=True, blank=True,
                                       on_delete=models.SET_NULL, related_name="+")
    nominated_gpus = models.JSONField(default=list, blank=True)
    # a gang spanning nodes: its further nodes' GPUs, [{"node": name, "gpus": [...]}, ...]
    nominated_peers = models.JSONField(default=list, blank=True)
    # the client's Idempotency-Key, if any: a retried submission gets this job back, provided
    # it asks for the same thing (the fingerprint of its spec)
    idempotency_key = models.CharField(max_length=255, blank=True)
    request_fingerprint = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(urgency_s__lte=MAX_URGENCY_S),
                                   name="job_urgency_at_most_a_day"),
            models.CheckConstraint(
                condition=models.Q(min_gpus__isnull=True)
                | models.Q(min_gpus__gte=1, min_gpus__lte=models.F("gpus")),
                name="job_min_gpus_within_gpus"),
            # held, or stopping at a checkpoint to be held (PREEMPTING goes HELD then)
            models.CheckConstraint(
                condition=models.Q(hold="")
                | models.Q(state__in=[JobState.HELD, JobState.PREEMPTING]),
                name="job_hold_only_while_held_or_stopping"),
            # only an ended job is erased, and an erased one keeps none of its content
            models.CheckConstraint(
                condition=models.Q(erased_at__isnull=True)
                | models.Q(state__in=sorted(TERMINAL), prompt="", output=""),
                name="job_erased_only_ended_and_empty"),
            models.UniqueConstraint(fields=["organization", "idempotency_key"],
                                    condition=~models.Q(idempotency_key=""),
                                    name="job_idempotency_key_unique"),
        ]
        indexes = [
            # the tick reads exactly the waiting jobs
            models.Index(fields=["enqueued_at"], name="job_queued_idx",
                         condition=models.Q(state=JobState.QUEUED)),
            # an organization's jobs, newest first, paged by id (the API's list)
            models.Index(fields=["organization", "-id"], name="job_org_newest_idx"),
            # and one project's (?project=): a small project is not found among them all
            models.Index(fields=["project", "-id"], name="job_project_newest_idx"),
            # metrics count the jobs not finished, however many have
            models.Index(fields=["state"], name="job_live_state_idx",
                         condition=~models.Q(state__in=sorted(TERMINAL))),
            # every tick releases the jobs whose retry wait is over
            models.Index(fields=["retry_at"], name="job_retry_due_idx",
                         condition=models.Q(state=JobState.RETRY_WAIT)),
            # every tick cancels the waiting jobs whose start deadline passed
            models.Index(fields=["start_by"], name="job_start_by_idx",
                         condition=models.Q(state__in=[JobState.QUEUED, JobState.HELD],
                                            start_by__isnull=False)),
            # the retention sweep reads an organization's ended jobs not erased, oldest first
            models.Index(fields=["organization", "finished_at"], name="job_unerased_ended_idx",
                         condition=models.Q(erased_at__isnull=True,
                                            finished_at__isnull=False)),
            # a submission sums what the organization's jobs of this month hold (its budgets)
            models.Index(fields=["organization", "created_at"], name="job_org_month_idx"),
            # every tick looks up the few queued jobs holding a nomination
            models.Index(fields=["nominated_node"], name="job_nominated_idx",
                         condition=models.Q(state=JobState.QUEUED,
                                            nominated_node__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.state})"


class JobEvent(models.Model):
    """One transition of one job, never updated or deleted."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(auto_now_add=True)
    from_state = models.CharField(max_length=12, blank=True)
    to_state = models.CharField(max_length=12)
    version = models.PositiveIntegerField(help_text="Job version after this event.")
    reason = models.CharField(max_length=200, blank=True)
    attempt = models.ForeignKey("jobs.Attempt", null=True, blank=True, on_delete=models.SET_NULL)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "version"], name="one_event_per_version")
        ]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_state or '∅'} → {self.to_state}"
