"""Rows for tests, made through the services where one exists."""

from __future__ import annotations

from jobs.models import Job, Organization
from jobs.services.submission import JobSpec, job_submit
from workers.agent.discovery import configured_gpus
from workers.models import Node
from workers.services.nodes import node_register


def make_node(name: str = "n1", gpus: int = 4, gpu_type: str = "H100") -> Node:
    return node_register(name=name, gpu_type=gpu_type,
                         gpus=configured_gpus(name, gpus, 81920))


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
