"""Copies of attempts' checkpoints in the service's storage."""

from django.db import models

from .attempt import Attempt
from .job import Job


class StoredCheckpoint(models.Model):
    """A copy of one node's checkpoint of an attempt in Django's storage, made while it ran
    or when it stopped to resume, so that the job resumes from it on whichever nodes it lands
    next (workers/services/checkpoints.py). Rank 0 is the attempt's own node. A job on one
    node keeps one copy an attempt, its latest; a gang's nodes keep their copy made at the
    stop and those of the last few steps copied while it ran, since a resume needs every
    node's copy of one step."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="stored_checkpoints")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE,
                                related_name="stored_checkpoints")
    rank = models.PositiveSmallIntegerField(default=0)
    name = models.CharField(max_length=255)  # the storage name of the tar
    # the binary's step, announced with the checkpoint (at the stop too), if it names one
    step = models.PositiveBigIntegerField(null=True, blank=True)
    # when the copy's files were taken (linked) while the binary ran; none at the stop
    taken_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job_id", "rank", "-attempt_id"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "rank", "step"], name="one_copy_per_step",
                                    condition=models.Q(taken_at__isnull=False)),
            models.UniqueConstraint(fields=["attempt", "rank"], name="one_stop_copy_per_rank",
                                    condition=models.Q(taken_at__isnull=True)),
        ]
        indexes = [models.Index(fields=["job", "rank", "-attempt"], name="latest_copy_idx")]

    def __str__(self) -> str:
        at = f", step {self.step}" if self.step is not None else ""
        at += "" if self.taken_at else ", at its stop"
        return f"checkpoint of job {self.job_id}, attempt {self.attempt_id}, rank {self.rank}{at}"
