"""One try of a job on GPUs, and the bindings of GPUs to it."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class AttemptStatus(models.TextChoices):
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    ENDED = "ENDED"


class Attempt(models.Model):
    class Outcome(models.TextChoices):
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"
        OOM = "OOM"
        TIMED_OUT = "TIMED_OUT"
        PREEMPTED = "PREEMPTED"
        CANCELLED = "CANCELLED"
        LOST = "LOST"

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="attempts")
    node = models.ForeignKey("workers.Node", on_delete=models.PROTECT, related_name="attempts")
    gpu_indices = models.JSONField(default=list)
    token = models.BigIntegerField(unique=True, help_text="Fencing token from a DB sequence.")
    status = models.CharField(max_length=10, choices=AttemptStatus.choices,
                              default=AttemptStatus.SCHEDULED)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    progress = models.FloatField(default=0.0)
    # its first progress report and when its latest came: the pace of this try since it began
    # reporting (one that resumed part-way, or took its time to load, is paced from there)
    progress_first = models.FloatField(null=True, blank=True)
    progress_first_at = models.DateTimeField(null=True, blank=True)
    progress_at = models.DateTimeField(null=True, blank=True)
    last_checkpoint_at = models.DateTimeField(null=True, blank=True)
    stop_requested = models.CharField(max_length=10, blank=True,
                                      help_text="'preempt', 'hold' or 'cancel' when asked "
                                                "to stop.")
    stop_deadline = models.DateTimeField(null=True, blank=True)
    # its binary ended and its node freed its GPUs before its report, which waits for its
    # checkpoint's copy (workers/services/checkpoints.py): it holds none there from then on
    gpus_freed_at = models.DateTimeField(null=True, blank=True)
    preempted_for = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The job these GPUs are promised to while this attempt stops.")
    outcome = models.CharField(max_length=10, choices=Outcome.choices, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    stderr_tail = models.TextField(blank=True)
    # the node whose binary failed it (a gang's failing rank's), for a failure another try
    # may not repeat: where several jobs fail in a row, the node is suspect (failing_nodes.py)
    failed_on = models.ForeignKey("workers.Node", null=True, blank=True,
                                  on_delete=models.SET_NULL, related_name="+")
    # its price, fixed when it starts (its GPUs' type), and the credits it was billed so far
    credits_per_hour = models.PositiveIntegerField(default=0)
    credits_metered = models.BigIntegerField(default=0)
    metered_until = models.DateTimeField(null=True, blank=True)
    # what its binary printed is in storage (workers/services/logs.py), until it expires
    log_kept = models.BooleanField(default=False)
    log_expired_at = models.DateTimeField(null=True, blank=True)
    # folded into its project's UsageAccount (jobs/scheduler/usage.py), once it has ended
    usage_counted = models.BooleanField(default=False)

    class Meta:
        constraints = [
            # invariant 3: at most one live attempt per job
            models.UniqueConstraint(fields=["job"], condition=Q(ended_at__isnull=True),
                                    name="one_live_attempt_per_job"),
        ]
        indexes = [
            # the reaper reads exactly the live leases
            models.Index(fields=["lease_expires_at"], name="attempt_live_lease_idx",
                         condition=Q(ended_at__isnull=True)),
            # the tick folds exactly the ended attempts not yet in a usage account
            models.Index(fields=["id"], name="attempt_usage_due_idx",
                         condition=Q(ended_at__isnull=False, usage_counted=False)),
            # the expiry sweep reads exactly the attempts whose logs are kept
            models.Index(fields=["ended_at"], name="attempt_log_kept_idx",
                         condition=Q(log_kept=True)),
        ]

    def __str__(self) -> str:
        return f"attempt {self.pk} of job {self.job_id} (token {self.token})"


class AttemptRank(models.Model):
    """A further node of an attempt whose gang spans nodes (rank 1, 2, …). Rank 0 is the
    attempt's own node: it reports the attempt's outcome, output and checkpoint; a rank
    that fails on its own ends the attempt (workers/services/ranks.py)."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="ranks")
    rank = models.PositiveSmallIntegerField()
    node = models.ForeignKey("workers.Node", on_delete=models.PROTECT,
                             related_name="attempt_ranks")
    gpu_indices = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=AttemptStatus.choices,
                              default=AttemptStatus.SCHEDULED)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    gpus_freed_at = models.DateTimeField(null=True, blank=True)  # as Attempt.gpus_freed_at
    outcome = models.CharField(max_length=10, choices=Attempt.Outcome.choices, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["attempt_id", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "rank"], name="one_row_per_rank"),
            models.UniqueConstraint(fields=["attempt", "node"], name="one_rank_per_node"),
            models.CheckConstraint(condition=Q(rank__gte=1), name="rank_beyond_the_first"),
        ]
        indexes = [
            # the reaper reads exactly the live ranks' leases
            models.Index(fields=["lease_expires_at"], name="rank_live_lease_idx",
                         condition=Q(ended_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"rank {self.rank} of attempt {self.attempt_id} on {self.node_id}"


class GpuBinding(models.Model):
    """A GPU held by an attempt. The partial unique index is invariant 2, kept by the DB."""

    gpu = models.ForeignKey("workers.Gpu", on_delete=models.PROTECT, related_name="bindings")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="bindings")
    bound_at = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["gpu"], condition=Q(released_at__isnull=True),
                                    name="one_live_binding_per_gpu"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu} → attempt {self.attempt_id}"
