"""A fenced-off attempt cleans up only its own files, never its successor's checkpoint."""

import pytest

from jobs.models import Attempt
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node
from workers.agent.command import AttemptPaths
from workers.agent.runner import _report
from workers.services.attempts import AttemptResult, attempt_start

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stale_report_leaves_the_new_attempts_files(alice, settings, tmp_path):
    settings.GPUSCHED_RETRY_BACKOFF_S = 0
    make_node("n1", gpus=1)
    job = make_job(alice)
    scheduler_tick_run()
    old = Attempt.objects.get(job=job)
    claim = attempt_start(attempt_id=old.pk, token=old.token)
    Attempt.objects.filter(pk=old.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    scheduler_tick_run()  # reaped, retried: a new attempt owns the job
    new = Attempt.objects.get(job=job, ended_at__isnull=True)
    old_paths = AttemptPaths.under(tmp_path, job.pk, old.pk, ".y4m")
    new_paths = AttemptPaths.under(tmp_path, job.pk, new.pk, ".y4m")
    for paths in (old_paths, new_paths):
        paths.create({})
    (new_paths.checkpoint_dir / "state").write_text("step 7")

    assert _report(claim, old_paths, AttemptResult("FAILED", 1, "", None, "exit_1")) == "stale"
    assert not old_paths.work_dir.exists()
    assert new_paths.work_dir.exists()
    assert (new_paths.checkpoint_dir / "state").read_text() == "step 7"
