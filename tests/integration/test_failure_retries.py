"""A failure another try may not repeat (a crash, a hang, a broken output) sends the job back
to the queue after a backoff, to resume from its checkpoint; one that would repeat (a bad
input, an OOM on the biggest GPUs it may use) ends it; past its retries it is dead-lettered.
A report that comes twice, or from a stale attempt, retries nothing twice."""

import pytest
from django.utils import timezone

from jobs.models import Attempt, GpuBinding, Job
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.submission import JobSpec, job_submit
from tests.support.factories import make_job, make_node, run_by_agent, start_placed
from tests.support.race import race
from workers.agent.discovery import configured_gpus
from workers.agent.runner import run_attempt
from workers.services.attempts import (
    AttemptResult,
    StaleAttempt,
    attempt_finish,
    claim_for,
)
from workers.services.nodes import node_register
from workers.services.reaper import reap_expired_attempts, release_due_retries
from workers.services.retries import retry_delay

pytestmark = pytest.mark.django_db(transaction=True)

CRASH = AttemptResult("FAILED", 1, "Traceback: boom", None, "exit_1")
OOM = AttemptResult("OOM", 1, "CUDA out of memory", None, "out_of_memory")


@pytest.fixture(autouse=True)
def retries(settings):
    settings.GPUSCHED_MAX_RETRIES = 2
    settings.GPUSCHED_RETRY_BACKOFF_S = 0


def _fail(attempt: Attempt, result: AttemptResult = CRASH) -> Job:
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token, result=result)


def test_a_crash_retries_after_a_backoff_and_the_retry_knows_it_is_one(alice, settings):
    settings.GPUSCHED_RETRY_BACKOFF_S = 30
    make_node(gpus=1)
    job = make_job(alice)
    before = timezone.now()
    job = _fail(start_placed(job))
    assert (job.state, job.retries, job.error_code) == ("RETRY_WAIT", 1, "")
    assert job.retry_at >= before + retry_delay(0)
    event = job.events.get(to_state="RETRY_WAIT")
    assert event.data == {"error_code": "exit_1", "exit_code": 1}
    assert "attempt failed: exit_1; retry 1 of 2" in event.reason
    assert not GpuBinding.objects.filter(released_at__isnull=True).exists()
    assert release_due_retries(now=timezone.now()) == 0  # its backoff is not over
    assert release_due_retries(now=job.retry_at) == 1
    retry = start_placed(Job.objects.get(pk=job.pk))
    claim = claim_for(retry, retry.token, node_rank=0, node_id=retry.node_id,
                      gpu_indices=retry.gpu_indices)
    assert claim.retry == 1  # GPUSCHED_RETRY for the binary
    assert Job.objects.get(pk=job.pk).state == "RUNNING"


def test_the_api_shows_a_job_waiting_to_retry_and_why(alice, api, settings):
    settings.GPUSCHED_RETRY_BACKOFF_S = 30
    make_node(gpus=1)
    job = _fail(start_placed(make_job(alice)))
    body = api.get(f"/api/v1/jobs/{job.pk}").json()
    assert (body["state"], body["retries"]) == ("RETRY_WAIT", 1)
    assert body["retry_at"] == job.retry_at.isoformat().replace("+00:00", "Z")
    events = api.get(f"/api/v1/jobs/{job.pk}/events").json()["results"]
    assert events[0]["to_state"] == "RETRY_WAIT"
    assert events[0]["data"] == {"error_code": "exit_1", "exit_code": 1}
    release_due_retries(now=job.retry_at)
    body = api.get(f"/api/v1/jobs/{job.pk}").json()
    assert (body["state"], body["retries"], body["retry_at"]) == ("QUEUED", 1, None)


def test_a_job_that_keeps_failing_is_dead_lettered_with_the_last_cause(alice):
    make_node(gpus=1)
    job = make_job(alice)
    for _ in range(2):
        _fail(start_placed(job))
        release_due_retries(now=timezone.now())
    job = _fail(start_placed(job), AttemptResult("FAILED", None, "stuck", None, "hung"))
    assert (job.state, job.error_code, job.retries) == ("DEAD", "retries_exhausted", 2)
    assert "the last: attempt failed: hung" in job.error and "stuck" in job.error
    assert Attempt.objects.filter(job=job).count() == 3


@pytest.mark.parametrize("exit_code", [2, 64, 78])
def test_a_binary_that_blames_its_input_fails_the_job_at_once(alice, exit_code):
    make_node(gpus=1)
    job = _fail(start_placed(make_job(alice)), AttemptResult(
        "FAILED", exit_code, "usage: bad --fps", None, f"exit_{exit_code}"))
    assert (job.state, job.error_code, job.retries) == ("FAILED", f"exit_{exit_code}", 0)


def test_a_report_that_comes_twice_retries_once(alice):
    make_node(gpus=1)
    attempt = start_placed(make_job(alice))
    _fail(attempt)
    with pytest.raises(StaleAttempt):
        _fail(attempt)
    job = Job.objects.get(pk=attempt.job_id)
    assert (job.state, job.retries) == ("RETRY_WAIT", 1)
    assert job.events.filter(to_state="RETRY_WAIT").count() == 1


def test_a_victim_that_crashes_while_it_stops_waits_to_retry(alice):
    from jobs.services.requeue import job_requeue

    make_node(gpus=1)
    attempt = start_placed(make_job(alice))
    job_requeue(job=Job.objects.get(pk=attempt.job_id), by="ops")
    job = _fail(attempt)
    assert (job.state, job.retries) == ("RETRY_WAIT", 1)


def _node(name: str, gpu_type: str, memory_mb: int, gpus: int = 1, island: str = ""):
    return node_register(name=name, gpu_type=gpu_type, island=island,
                         gpus=configured_gpus(name, gpus, memory_mb))


def test_an_oom_retries_on_gpus_with_more_memory_where_it_may_use_them(alice):
    _node("small", "A100", 40_960)
    _node("big", "H100", 81_920)
    job = job_submit(organization=alice, spec=JobSpec(prompt="x", gpus=1, gpu_types=["A100",
                                                                                      "H100"]))
    attempt = start_placed(job)
    assert attempt.node.name == "small"  # its first choice of type
    job = _fail(attempt, OOM)
    assert (job.state, job.min_gpu_memory_mb) == ("RETRY_WAIT", 40_961)
    assert job.events.get(to_state="RETRY_WAIT").data["changed"] == {
        "min_gpu_memory_mb": [0, 40_961]}
    release_due_retries(now=timezone.now())
    assert start_placed(Job.objects.get(pk=job.pk)).node.name == "big"


@pytest.mark.parametrize("spec", [
    {"gpu_types": ["A100"]},  # bigger GPUs exist, but not of a type it takes
    {"gpus": 2},  # bigger GPUs exist, but no node or island of them holds it
])
def test_an_oom_with_no_bigger_gpus_it_could_use_fails_the_job(alice, spec):
    _node("small", "A100", 40_960, gpus=2)
    _node("big", "H100", 81_920, gpus=1)
    attempt = start_placed(job_submit(organization=alice, spec=JobSpec(prompt="x", **{
        "gpus": 1, **spec})))
    job = _fail(attempt, OOM)
    assert (job.state, job.error_code, job.min_gpu_memory_mb) == ("FAILED", "out_of_memory", 0)


def test_a_gang_that_runs_out_of_memory_may_move_to_an_island_of_bigger_gpus(alice):
    _node("small", "A100", 40_960, gpus=4)
    for name in ("big1", "big2"):
        _node(name, "H100", 81_920, gpus=2, island="i1")
    job = _fail(start_placed(make_job(alice, gpus=4)), OOM)
    assert (job.state, job.min_gpu_memory_mb) == ("RETRY_WAIT", 40_961)


def test_a_job_that_asks_for_no_retries_is_dead_lettered_at_its_first_failure_or_loss(
        alice, api):
    make_node(gpus=2)
    response = api.post("/api/v1/jobs", {"prompt": "x", "max_retries": 0}, format="json")
    crashed = Job.objects.get(pk=response.json()["id"])
    lost = job_submit(organization=alice, spec=JobSpec(prompt="x", max_retries=0))
    assert api.get(f"/api/v1/jobs/{crashed.pk}").json()["max_retries"] == 0
    job = _fail(start_placed(crashed))
    assert (job.state, job.error_code) == ("DEAD", "retries_exhausted")
    attempt = start_placed(lost)
    Attempt.objects.filter(pk=attempt.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    reap_expired_attempts(now=timezone.now())
    assert Job.objects.get(pk=lost.pk).state == "DEAD"


def test_a_job_may_ask_for_fewer_retries_than_the_service_gives_not_more(alice, api):
    default = api.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
    assert api.get(f"/api/v1/jobs/{default}").json()["max_retries"] == 2  # the service's
    response = api.post("/api/v1/jobs", {"prompt": "x", "max_retries": 3}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "max_retries_out_of_range"
    for bad in (-1, "many"):
        response = api.post("/api/v1/jobs", {"prompt": "x", "max_retries": bad},
                            format="json")
        assert response.status_code == 400, bad


def test_a_crash_report_racing_the_reaper_retries_the_job_once(alice, settings):
    """The node reports a crash just as the attempt's lease runs out: one of the two ends
    the attempt and moves the job; the other finds it ended. Each race, one retry."""
    from functools import partial

    settings.GPUSCHED_RETRY_BACKOFF_S = 3600  # each race's job waits out the later races
    make_node(gpus=1)
    for _ in range(10):
        job = make_job(alice)
        attempt = start_placed(job)
        Attempt.objects.filter(pk=attempt.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
        assert race(partial(_fail, attempt),
                     partial(reap_expired_attempts, now=timezone.now())) == []
        job.refresh_from_db()
        assert (job.state, job.retries) == ("RETRY_WAIT", 1)
        assert job.events.filter(to_state="RETRY_WAIT").count() == 1
        assert not GpuBinding.objects.filter(released_at__isnull=True).exists()


def test_an_oom_gang_does_not_move_to_an_island_of_unlike_nodes(alice):
    """Bigger GPUs in one island, but of two types: no gang spans them (docs/nodes.md)."""
    _node("small", "A100", 40_960, gpus=4)
    _node("big1", "H100", 81_920, gpus=2, island="i1")
    _node("big2", "H200", 143_360, gpus=2, island="i1")
    job = _fail(start_placed(make_job(alice, gpus=4)), OOM)
    assert (job.state, job.error_code) == ("FAILED", "out_of_memory")


def test_the_api_lists_a_jobs_tries_with_where_they_ran_and_their_stderr(alice, bob, api):
    from jobs.api.openapi import openapi_document
    from tests.support.openapi import conforms

    make_node(gpus=1)
    job = make_job(alice)
    _fail(start_placed(job))
    release_due_retries(now=timezone.now())
    start_placed(Job.objects.get(pk=job.pk))
    answer = api.get(f"/api/v1/jobs/{job.pk}/attempts")
    document = openapi_document()
    schema = document["paths"]["/api/v1/jobs/{job_id}/attempts"]["get"]["responses"]["200"][
        "content"]["application/json"]["schema"]
    assert conforms(answer.json(), schema, document) == []
    running, crashed = answer.json()["results"]
    assert (crashed["outcome"], crashed["exit_code"], crashed["stderr_tail"]) == (
        "FAILED", 1, "Traceback: boom")
    assert crashed["nodes"] == [{"rank": 0, "node": "n1", "gpus": [0]}]
    assert (running["outcome"], running["ended_at"]) == ("", None)
    other = make_job(bob)
    assert api.get(f"/api/v1/jobs/{other.pk}/attempts").status_code == 404


def test_a_crashed_job_retries_on_another_node_where_one_is_free(alice):
    make_node("n1", gpus=1)
    make_node("n2", gpus=1)
    job = make_job(alice)
    first = start_placed(job)
    job = _fail(first)
    assert job.avoid_node == first.node.name
    for _ in range(2):  # its two retries, each away from the node the try before failed on
        release_due_retries(now=timezone.now())
        retry = start_placed(Job.objects.get(pk=job.pk))
        assert retry.node_id != first.node_id
        first, job = retry, _fail(retry)


def _failed_on_n1(job: Job, error: str) -> None:
    """The job's one try failed to start on n1: it waits to retry elsewhere, counted
    against n1, the error in its stderr."""
    (failed,) = Attempt.objects.filter(job=job)
    assert (job.state, job.avoid_node, failed.failed_on_id) == ("RETRY_WAIT", "n1", failed.node_id)
    assert job.events.get(to_state="RETRY_WAIT").data["error_code"] == "launch_failed"
    assert error in failed.stderr_tail


def _retry_succeeds_on_n2(job: Job) -> None:
    make_node("n2", gpus=1)
    release_due_retries(now=timezone.now())
    scheduler_tick_run()
    retry = Attempt.objects.get(job=job, ended_at__isnull=True)
    assert retry.node.name == "n2"
    assert run_attempt(retry.pk, retry.token) == "SUCCEEDED"


def test_a_node_that_cannot_start_the_binary_sends_its_job_to_another(alice, agent, settings):
    """A binary missing on one node is that node's fault: the job retries elsewhere, and the
    failure counts against the node (failing_nodes.py), not against the job's input."""
    installed = settings.GPUSCHED_BINARY
    settings.GPUSCHED_BINARY = "/opt/not-installed/model --output {output}"
    _failed_on_n1(run_by_agent(alice, run_seconds=0.2, progress_interval=0.1),
                  "No such file or directory")
    settings.GPUSCHED_BINARY = installed  # n2 has it
    _retry_succeeds_on_n2(Job.objects.get())


def test_a_node_whose_work_root_cannot_be_written_sends_its_job_to_another(
        alice, agent, settings, tmp_path):
    work_root = settings.GPUSCHED_WORK_ROOT
    settings.GPUSCHED_WORK_ROOT = tmp_path / "not-mounted"
    settings.GPUSCHED_WORK_ROOT.write_text("")  # a file where the work root should be
    _failed_on_n1(run_by_agent(alice, run_seconds=0.2, progress_interval=0.1),
                  "Not a directory")
    settings.GPUSCHED_WORK_ROOT = work_root
    _retry_succeeds_on_n2(Job.objects.get())


def test_a_failed_try_on_a_shared_work_root_leaves_its_checkpoint_to_the_retry(
        alice, agent, settings):
    """Where the work root is shared and nothing copies checkpoints, the node's is the only
    one: the retry resumes from it, as the failed try was billed for the work it kept."""
    from django.core.files.storage import default_storage

    from workers.services.logs import log_name

    settings.GPUSCHED_STORE_CHECKPOINTS = False
    job = run_by_agent(alice, run_seconds=1, progress_interval=0.1, checkpoint_every=0.2,
                       fail="crash", fail_at=0.7, fail_tries=1)
    kept = settings.GPUSCHED_WORK_ROOT / f"job-{job.pk}" / "checkpoint"
    assert job.state == "RETRY_WAIT" and any(kept.iterdir())
    release_due_retries(now=timezone.now())
    scheduler_tick_run()
    retry = Attempt.objects.get(job=job, ended_at__isnull=True)
    assert run_attempt(retry.pk, retry.token) == "SUCCEEDED"
    with default_storage.open(log_name(job.pk, retry.pk, 0, "stdout")) as log:
        assert b"RESUME " in log.read()
    assert not kept.parent.exists()  # the job ended: nothing of it stays on the node
