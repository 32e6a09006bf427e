"""Redis down (gpusched/cache.py): the cache's copies and hints are missed, never failed on.
The API takes, lists and shows jobs and answers its metrics; a round places; a node's report
of a crash settles its try; /readyz says the cache is down, and stays ready. Redis here is a
port nothing listens on, as a stopped server leaves it."""

import pytest

from jobs.models import Attempt, Job
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_node
from workers.services.attempts import AttemptResult, attempt_finish, attempt_start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cache_down(settings):
    settings.CACHES = {"default": {"BACKEND": "gpusched.cache.ForgivingRedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0"}}


def test_jobs_are_taken_placed_and_settled_while_the_cache_is_down(alice, api, client,
                                                                    cache_down, caplog):
    make_node("n1", gpus=1)
    answer = api.post("/api/v1/jobs", {"prompt": "a heron", "gpus": 1}, format="json")
    assert answer.status_code == 202, answer.content
    job = Job.objects.get(pk=answer.json()["id"])
    assert api.get(f"/api/v1/jobs/{job.pk}").json()["state"] == "QUEUED"
    assert api.get("/api/v1/jobs").json()["results"][0]["id"] == job.pk
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    job = attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                         result=AttemptResult("FAILED", 1, "boom", None, "exit_1"))
    assert job.state == "RETRY_WAIT"
    assert client.get("/metrics").status_code == 200
    ready = client.get("/readyz")  # serving, so ready: its load balancer keeps it
    assert ready.status_code == 200 and "cache" in ready.json()["degraded"]
    assert "the cache (Redis) does not answer" in caplog.text
