"""An organization's projects: the names its jobs share GPUs and budgets under. Its owners
make and set them on the dashboard's team page, and so does a client's key of scope `full`
(a key acts for the whole organization, as for its webhooks): a platform that gives each of
its own customers a project with a cap and a budget does so without a person. Each change is
audited, by the member or the key, in its own transaction.

What a project is set to: its weight against the organization's other projects (the
scheduler reads it every round; no other organization's share moves), the GPUs its jobs may
hold at once (inside the organization's cap; the next round holds it, running work stays),
and what its jobs may commit a month (credits/services/budgets.py)."""

from __future__ import annotations

import re

from django.db import IntegrityError, transaction

from credits.models import Budget
from credits.services.budgets import budget_set
from jobs.models import ApiKey, Organization, Project
from jobs.services.audit import audit
from jobs.services.errors import Conflict, NotFound, ValidationFailed
from jobs.services.org_limits import running_gpus_by_project
from jobs.services.tenancy import owner_or_key

MIN_WEIGHT, MAX_WEIGHT = 0.01, 100.0  # a share inside the organization, against the others'
MAX_PROJECTS = 100
MAX_CAP = 100_000  # GPUs: more than any fleet, so a cap is a number a person meant
PROJECT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,59}")
SETTINGS = ("weight", "running_gpu_cap", "monthly_limit")  # what a project's owners set
MANAGES = "its projects"


def checked_weight(value: float) -> float:
    """A project's or member's weight, refused outside the range (NaN too)."""
    if not MIN_WEIGHT <= value <= MAX_WEIGHT:
        raise ValidationFailed(f"a weight is {MIN_WEIGHT} to {MAX_WEIGHT:g}",
                               code="weight_out_of_range", field="weight")
    return value


def checked_cap(cap: int | None) -> int | None:
    """A project's or member's running-GPU cap, refused outside the range."""
    if cap is not None and not 0 <= cap <= MAX_CAP:
        raise ValidationFailed(f"a GPU cap is 0 to {MAX_CAP:,}, or none",
                               code="cap_out_of_range", field="running_gpu_cap")
    return cap


def project_create(*, organization: Organization, name: str, weight: float = 1.0,
                   running_gpu_cap: int | None = None, monthly_limit: int | None = None,
                   user=None, api_key: ApiKey | None = None) -> Project:
    """A new project of the organization, set as asked, or nothing at all: jobs name it to
    share and budget apart."""
    owner_or_key(organization, user=user, api_key=api_key, manages=MANAGES)
    if not PROJECT_NAME.fullmatch(name):
        raise ValidationFailed("a project's name is 1 to 60 lowercase letters, digits, '_' "
                               "or '-', from a letter or digit", code="invalid_project_name",
                               field="name")
    with transaction.atomic():
        Organization.objects.select_for_update(no_key=True).get(pk=organization.pk)
        if organization.projects.count() >= MAX_PROJECTS:
            raise Conflict(f"at most {MAX_PROJECTS} projects per organization",
                           code="too_many_projects")
        try:
            with transaction.atomic():
                project = Project.objects.create(
                    organization=organization, name=name, weight=checked_weight(weight),
                    running_gpu_cap=checked_cap(running_gpu_cap))
        except IntegrityError:
            raise Conflict(f"the organization has a project {name!r} already",
                           code="project_exists", field="name") from None
        audit(organization, "project.made", user=user, api_key=api_key, project=name,
              weight=weight, cap=running_gpu_cap)
        if monthly_limit is not None:
            budget_set(organization=organization, project=project,
                       monthly_limit=monthly_limit, user=user, api_key=api_key)
        return project


def project_settle(*, organization: Organization, project_id: int, changes: dict,
                   user=None, api_key: ApiKey | None = None) -> Project:
    """Set any of a project's `SETTINGS` named in `changes` (None: no cap, no budget), all
    or none; each one that changes is audited with what it was."""
    owner_or_key(organization, user=user, api_key=api_key, manages=MANAGES)
    with transaction.atomic():
        project = (Project.objects.select_for_update()
                   .filter(organization=organization, pk=project_id).first())
        if project is None:
            raise NotFound("no such project")
        fields = []
        weight = changes.get("weight", project.weight)
        if weight != project.weight:  # one an operator set beyond the range may stay
            audit(organization, "project.weighed", user=user, api_key=api_key,
                  project=project.name, weight=checked_weight(weight), was=project.weight)
            project.weight, fields = weight, [*fields, "weight"]
        cap = changes.get("running_gpu_cap", project.running_gpu_cap)
        if cap != project.running_gpu_cap:
            audit(organization, "project.capped", user=user, api_key=api_key,
                  project=project.name, cap=checked_cap(cap), was=project.running_gpu_cap)
            project.running_gpu_cap, fields = cap, [*fields, "running_gpu_cap"]
        if fields:
            project.save(update_fields=fields)
        if "monthly_limit" in changes:
            budget_set(organization=organization, project=project,
                       monthly_limit=changes["monthly_limit"], user=user, api_key=api_key)
    return project


def project_rows(organization: Organization, name: str | None = None) -> list[dict]:
    """The organization's projects (or the one named), by name, each with its settings and
    the GPUs its jobs hold now."""
    projects = organization.projects.order_by("name")
    if name is not None:
        projects = projects.filter(name=name)
    limits = dict(Budget.objects.filter(organization=organization, project__isnull=False)
                  .values_list("project_id", "monthly_limit"))
    running = running_gpus_by_project(organization)
    return [{"name": p.name, "weight": p.weight, "running_gpu_cap": p.running_gpu_cap,
             "running_gpus": running.get(p.pk, 0), "monthly_limit": limits.get(p.pk)}
            for p in projects]
