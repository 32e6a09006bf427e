"""A client's key of scope full makes an organization's projects and sets their weights,
caps and budgets, as owners do on the dashboard: the scheduler and admission act on them,
each change is audited by the key, a refusal changes nothing, and nobody reaches another
organization's projects."""

import pytest

from credits.models import Budget, GpuPrice
from credits.services.grants import credits_grant
from jobs.models import ApiKey, Job, OrganizationEvent, Project
from jobs.scheduler.snapshot import load_project_caps, load_project_weights
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.errors import Forbidden
from jobs.services.projects import MAX_PROJECTS, project_create, project_settle
from tests.support.factories import make_node
from tests.support.threads import race

pytestmark = pytest.mark.django_db


def test_a_key_makes_a_project_set_as_asked_that_jobs_may_name_at_once(api, alice):
    made = api.post("/api/v1/projects", {"name": "render", "weight": 3, "running_gpu_cap": 2,
                                         "monthly_limit": 500}, format="json")
    assert made.status_code == 201, made.content
    assert made.json() == {"name": "render", "weight": 3.0, "running_gpu_cap": 2,
                           "running_gpus": 0, "monthly_limit": 500}
    assert load_project_weights()[("alice", "render")] == 3
    assert load_project_caps() == {("alice", "render"): 2}
    assert Budget.objects.get(project__name="render").monthly_limit == 500
    actions = {e.action: e for e in OrganizationEvent.objects.select_related("api_key")}
    assert set(actions) == {"project.made", "budget.set"}
    assert all(e.api_key.organization_id == alice.pk and e.user is None
               for e in actions.values())
    job = api.post("/api/v1/jobs", {"prompt": "a heron", "project": "render"}, format="json")
    assert Job.objects.get(pk=job.json()["id"]).project.name == "render"
    assert api.get("/api/v1/projects/render").json()["name"] == "render"


def test_a_change_sets_only_what_is_sent_and_the_next_round_holds_it(api, alice):
    api.post("/api/v1/projects", {"name": "render", "monthly_limit": 500}, format="json")
    changed = api.patch("/api/v1/projects/render", {"running_gpu_cap": 2}, format="json")
    assert changed.status_code == 200
    assert changed.json() == {"name": "render", "weight": 1.0, "running_gpu_cap": 2,
                              "running_gpus": 0, "monthly_limit": 500}
    make_node("n1", gpus=8)
    ids = [api.post("/api/v1/jobs", {"prompt": "x", "gpus": 2, "project": "render"},
                    format="json").json()["id"] for _ in range(2)]
    scheduler_tick_run()
    assert Job.objects.get(pk=ids[1]).pending_code == "project_cap"
    assert api.get("/api/v1/projects/render").json()["running_gpus"] == 2
    cleared = api.patch("/api/v1/projects/render", {"running_gpu_cap": None,
                                                    "monthly_limit": None}, format="json")
    assert cleared.json()["running_gpu_cap"] is None and cleared.json()["monthly_limit"] is None
    assert load_project_caps() == {} and not Budget.objects.exists()
    event = OrganizationEvent.objects.filter(action="project.capped").latest("pk")
    assert (event.detail["cap"], event.detail["was"]) == (None, 2)


def test_a_budget_set_by_the_api_refuses_what_would_pass_it(api, alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=100_000)
    api.post("/api/v1/projects", {"name": "ads", "monthly_limit": 1_000}, format="json")
    over = api.post("/api/v1/jobs", {"prompt": "x", "project": "ads", "time_limit_s": 1_200},
                    format="json")
    assert over.status_code == 402 and over.json()["error"]["code"] == "budget_exceeded"
    api.patch("/api/v1/projects/ads", {"monthly_limit": 2_000}, format="json")
    assert api.post("/api/v1/jobs", {"prompt": "x", "project": "ads", "time_limit_s": 1_200},
                    format="json").status_code == 202


@pytest.mark.parametrize("body, code", [
    ({"name": "Bad Name"}, "invalid_project_name"),
    ({"name": 7}, "invalid"),
    ({}, "invalid"),
    ({"name": "ads", "weight": 0}, "weight_out_of_range"),
    ({"name": "ads", "weight": "NaN"}, "invalid"),
    ({"name": "ads", "running_gpu_cap": -1}, "cap_out_of_range"),
    ({"name": "ads", "running_gpu_cap": 1.5}, "invalid"),
    ({"name": "ads", "monthly_limit": 10**16}, "budget_out_of_range"),
    ({"name": "ads", "running_gpus_cap": 4}, "unknown_field"),
    (["ads"], "invalid"),
])
def test_a_refused_project_makes_nothing(api, alice, body, code):
    answer = api.post("/api/v1/projects", body, format="json")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == code, answer.content
    assert not Project.objects.filter(name="ads").exists() and not Budget.objects.exists()
    assert not OrganizationEvent.objects.exists()


@pytest.mark.parametrize("body, code", [
    ({"name": "other"}, "not_amendable"),
    ({"weight": 2, "running_gpu_cap": -1}, "cap_out_of_range"),
    ({"weight": 2, "monthly_limit": -5}, "budget_out_of_range"),
    ({"weight": 1000}, "weight_out_of_range"),
    ({"weight": "heavy"}, "invalid"),
])
def test_a_refused_change_changes_nothing(api, alice, body, code):
    api.post("/api/v1/projects", {"name": "ads", "weight": 1.5, "running_gpu_cap": 3,
                                  "monthly_limit": 10}, format="json")
    before = OrganizationEvent.objects.count()
    answer = api.patch("/api/v1/projects/ads", body, format="json")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == code, answer.content
    project = Project.objects.get(name="ads")
    assert (project.weight, project.running_gpu_cap, Budget.objects.get().monthly_limit) == (
        1.5, 3, 10)
    assert OrganizationEvent.objects.count() == before


def test_taken_names_and_too_many_projects_are_conflicts(api, alice):
    assert api.post("/api/v1/projects", {"name": "default"}, format="json").json()[
        "error"]["code"] == "project_exists"
    for i in range(MAX_PROJECTS - alice.projects.count()):
        Project.objects.create(organization=alice, name=f"p{i}")
    full = api.post("/api/v1/projects", {"name": "one-more"}, format="json")
    assert full.status_code == 409 and full.json()["error"]["code"] == "too_many_projects"


@pytest.mark.django_db(transaction=True)
def test_racing_makes_of_one_name_make_it_once(alice):
    key = ApiKey.objects.get(organization=alice)
    refused = []

    def make() -> None:
        try:
            project_create(organization=alice, name="render", running_gpu_cap=4,
                           monthly_limit=100, api_key=key)
        except Exception as exc:  # noqa: BLE001 - counted below
            refused.append(getattr(exc, "code", repr(exc)))

    race(make, 4)
    assert refused == ["project_exists"] * 3
    assert Project.objects.filter(name="render").count() == 1 and Budget.objects.count() == 1


def test_another_organizations_project_is_not_found_nor_changed(api, alice, bob):
    theirs = Project.objects.create(organization=bob, name="secret", weight=2)
    assert api.get("/api/v1/projects/secret").status_code == 404
    assert api.patch("/api/v1/projects/secret", {"weight": 5}, format="json").status_code == 404
    assert api.patch("/api/v1/projects/nope", {"weight": 5}, format="json").status_code == 404
    theirs.refresh_from_db()
    assert theirs.weight == 2
    with pytest.raises(Forbidden):  # the service holds a key to its own organization too
        project_settle(organization=bob, project_id=theirs.pk, changes={"weight": 5},
                       api_key=ApiKey.objects.get(organization=alice))


def test_a_change_comes_from_an_owner_or_a_key_never_from_nobody(alice):
    with pytest.raises(Forbidden):
        project_create(organization=alice, name="ads")
    assert not Project.objects.filter(name="ads").exists()
