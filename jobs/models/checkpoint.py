"""Copies of attempts' checkpoints in the service's storage."""

from django.db import models

from .attempt import Attempt
from .job import Job


class StoredCheckpoint(models.Model):
    """One node's latest checkpoint of an attempt, copied to Django's storage while it ran
    or when it stopped to resume, so that the job resumes from it on whichever nodes it lands
    next (workers/services/checkpoints.py). Rank 0 is the attempt's own node."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="stored_checkpoints")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE,
                                related_name="stored_checkpoints")
    rank = models.PositiveSmallIntegerField(default=0)
    name = models.CharField(max_length=255)  # the storage name of the tar
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job_id", "rank", "-attempt_id"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "rank"], name="one_copy_per_rank"),
        ]
        indexes = [models.Index(fields=["job", "rank", "-attempt"], name="latest_copy_idx")]

    def __str__(self) -> str:
        return f"checkpoint of job {self.job_id}, attempt {self.attempt_id}, rank {self.rank}"
