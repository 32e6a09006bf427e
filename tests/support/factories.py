"""Rows for tests, made through the services where one exists."""

from __future__ import annotations

from jobs.models import Job, Membership, Organization
from jobs.services.submission import JobSpec, job_submit
from workers.agent.discovery import configured_gpus
from workers.models import Node
from workers.services.nodes import node_register


def make_node(name: str = "n1", gpus: int = 4, gpu_type: str = "H100", island: str = "") -> Node:
    return node_register(name=name, gpu_type=gpu_type, island=island,
                         gpus=configured_gpus(name, gpus, 81920))


def run_by_agent(org: Organization, **params) -> Job:
    """A job of `org` on a node n1 of one GPU, placed by a round and run to its end by the
    real node agent with the fake generator (`params`: its knobs); the job as it ended."""
    from jobs.models import Attempt
    from jobs.scheduler.tick import scheduler_tick_run
    from workers.agent.runner import run_attempt

    make_node("n1", gpus=1)
    job = make_job(org, **params)
    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job)
    run_attempt(attempt.pk, attempt.token)
    return Job.objects.get(pk=job.pk)


def make_member(org: Organization, username: str):
    """A dashboard user who belongs to `org`."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username)
    Membership.objects.create(user=user, organization=org)
    return user


def make_job(org: Organization, gpus: int = 1, **params):
    return job_submit(organization=org, spec=JobSpec(prompt="a cat on a skateboard", gpus=gpus,
                                                     params=params))


def submit_alternating(org: Organization, projects: tuple[str, ...], count: int) -> None:
    """`count` 1-GPU jobs, submitted to the projects in turn."""
    for i in range(count):
        job_submit(organization=org,
                   spec=JobSpec(prompt="a cat", gpus=1, project=projects[i % len(projects)]))


def started_projects() -> list[str]:
    """The project of every job the scheduler started, sorted."""
    return sorted(Job.objects.filter(state="SCHEDULED").values_list("project__name", flat=True))


def start_placed(job: Job):
    """Run a round, then start the attempt it placed `job` in, as its node agent would."""
    from jobs.models import Attempt
    from jobs.scheduler.tick import scheduler_tick_run
    from workers.services.attempts import attempt_start

    scheduler_tick_run()
    attempt = Attempt.objects.get(job=job, ended_at__isnull=True)
    attempt_start(attempt_id=attempt.pk, token=attempt.token)
    return attempt


def run_placed_job(job: Job, *, ran_for_s: float, outcome: str = "SUCCEEDED",
                   checkpointed: bool = False):
    """Place `job` (a node must have room), start it as if `ran_for_s` seconds ago, then end
    it with `outcome` through the services the node agent calls; returns its attempt.
    `checkpointed`: a checkpoint just before the end posts the time it kept."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import Attempt
    from workers.services.attempts import AttemptResult, attempt_finish, attempt_heartbeat

    attempt = start_placed(job)
    Attempt.objects.filter(pk=attempt.pk).update(
        started_at=timezone.now() - timedelta(seconds=ran_for_s))
    if checkpointed:
        attempt_heartbeat(attempt_id=attempt.pk, token=attempt.token, checkpointed=True)
    failed = outcome != "SUCCEEDED"  # by a bad input (exit 2): it ends the job, no retry
    attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                   result=AttemptResult(outcome, 2 if failed else 0, "", None,
                                        "exit_2" if failed else ""))
    attempt.refresh_from_db()
    return attempt


VIDEO = b"YUV4MPEG2 W2 H2 F1:1\nFRAME\n" + bytes(range(6))  # what a try made


def run_to_success(job: Job, workdir):
    """A round places `job` (a node must have room), its node starts it and it ends
    SUCCEEDED with VIDEO as its output, written under `workdir`; returns the job."""
    from workers.services.attempts import AttemptResult, attempt_finish

    attempt = start_placed(job)
    made = workdir / "out.y4m"
    made.write_bytes(VIDEO)
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                          result=AttemptResult("SUCCEEDED", 0, output_path=made))
