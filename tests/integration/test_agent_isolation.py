"""What a tenant's binary can reach through the node agent: none of the service's secrets in
its environment (it may print them to the log its tenant reads), and no output path outside
its attempt's work directory, even for a job whose params predate the intake's checks."""

import json
import sys

import pytest

from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node, run_by_agent
from workers.agent.runner import run_attempt

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_binary_sees_none_of_the_workers_secrets(alice, agent, settings, monkeypatch,
                                                     tmp_path):
    monkeypatch.setenv("SECRET_KEY", "do-not-leak-1")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:do-not-leak-2@db/gpusched")
    monkeypatch.setenv("GPUSCHED_MEDIA_ROOT", "/srv/do-not-leak-3")
    seen = tmp_path / "environ.json"
    settings.GPUSCHED_BINARY = (f"{sys.executable} -c \"import json, os; "
                                f"open('{seen}', 'w').write(json.dumps(dict(os.environ)))\"")
    run_by_agent(alice)
    environ = json.loads(seen.read_text())
    assert "do-not-leak" not in seen.read_text()
    assert not {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL"} & set(environ)
    assert environ["PATH"] and environ["GPUSCHED_OUTPUT_PATH"].endswith("output.y4m")


def test_the_fake_generator_still_runs_on_what_it_is_given(alice, agent):
    job = run_by_agent(alice, run_seconds=0.5, progress_interval=0.25)
    assert job.state == "SUCCEEDED", job.error


def test_a_stored_output_suffix_that_leaves_the_work_dir_fails_the_job_at_once(alice, agent,
                                                                                settings):
    """Its input's fault, not the node's: no retry, no node blamed."""
    make_node("n1", gpus=1)
    job = make_job(alice, run_seconds=0.5, progress_interval=0.25)
    # as a job submitted before the intake refused such a suffix holds it
    Job.objects.filter(pk=job.pk).update(
        params={**job.params, "output_suffix": "/../../../job-999/checkpoint/x"})
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    assert run_attempt(attempt.pk, attempt.token) == "FAILED"
    job.refresh_from_db()
    assert (job.state, job.error_code, job.retries) == ("FAILED", "exit_2", 0)
    assert "work directory" in job.error
    assert not (settings.GPUSCHED_WORK_ROOT / "job-999").exists()
