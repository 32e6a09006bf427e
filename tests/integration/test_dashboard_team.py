"""An organization's owners make its projects and set its weights, budgets and roles on the
dashboard, and the scheduler and admission act on them; members look; a refusal changes
nothing; the organization keeps an owner; nobody reaches another organization's."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from credits.models import Budget, GpuPrice
from credits.services.grants import credits_grant
from jobs.models import Job, Membership, Organization, OrganizationEvent, Project
from jobs.scheduler.snapshot import load_project_caps, load_project_weights, load_user_weights
from jobs.scheduler.tick import scheduler_tick_run
from jobs.scheduler.usage import user_key
from jobs.services.errors import Conflict
from jobs.services.team import member_settle
from tests.support.factories import make_member, make_node
from tests.support.threads import race

pytestmark = pytest.mark.django_db


def _page(client) -> str:
    return client.get("/dashboard/team").content.decode()


def test_an_owner_makes_a_project_that_jobs_may_name_at_once(owner, api, alice):
    answer = owner.post("/dashboard/team/alice/projects", {"name": "trailers", "weight": "3"},
                        follow=True)
    assert "Project trailers is made." in answer.content.decode()
    assert Project.objects.get(organization=alice, name="trailers").weight == 3
    assert load_project_weights()[("alice", "trailers")] == 3  # the next round's
    made = api.post("/api/v1/jobs", {"prompt": "a heron", "project": "trailers"},
                    format="json")
    assert made.status_code == 202
    assert Job.objects.get(pk=made.json()["id"]).project.name == "trailers"


@pytest.mark.parametrize("form, status, words", [
    ({"name": "Trailers"}, 400, "lowercase"),
    ({"name": "a b"}, 400, "lowercase"),
    ({"name": ""}, 400, "lowercase"),
    ({"name": "x" * 61}, 400, "lowercase"),
    ({"name": "ok", "weight": "0"}, 400, "a weight is"),
    ({"name": "ok", "weight": "1000"}, 400, "a weight is"),
    ({"name": "ok", "weight": "nan"}, 400, "is not a weight"),
    ({"name": "ok", "weight": "much"}, 400, "is not a weight"),
    ({"name": "default"}, 409, "already"),
])
def test_a_bad_project_is_refused_and_nothing_is_made(owner, alice, form, status, words):
    answer = owner.post("/dashboard/team/alice/projects", form)
    assert answer.status_code == status and words in answer.content.decode()
    assert list(Project.objects.values_list("name", flat=True)) == ["default"]


def test_weights_and_budgets_reach_the_scheduler_and_admission(owner, api, alice, olga):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=100_000)
    project = Project.objects.create(organization=alice, name="ads")
    owner.post(f"/dashboard/team/alice/projects/{project.pk}",
               {"weight": "0.5", "monthly_limit": "1,000"})
    assert load_project_weights()[("alice", "ads")] == 0.5
    assert Budget.objects.get(project=project).monthly_limit == 1_000
    over = api.post("/api/v1/jobs", {"prompt": "x", "project": "ads", "time_limit_s": 1_200},
                    format="json")
    assert (over.status_code, over.json()["error"]["code"]) == (402, "budget_exceeded")
    owner.post(f"/dashboard/team/alice/projects/{project.pk}",
               {"weight": "0.5", "monthly_limit": ""})  # blank: no budget
    assert not Budget.objects.exists()
    assert api.post("/api/v1/jobs", {"prompt": "x", "project": "ads", "time_limit_s": 1_200},
                    format="json").status_code == 202

    mia = make_member(alice, "mia")
    membership = Membership.objects.get(user=mia)
    owner.post(f"/dashboard/team/alice/members/{membership.pk}",
               {"role": "member", "weight": "2", "monthly_limit": "50"})
    assert load_user_weights()[("alice", user_key(mia.pk))] == 2
    assert Budget.objects.get(user=mia).monthly_limit == 50
    owner.post("/dashboard/team/alice/credits", {"monthly_limit": "7"})
    assert Budget.objects.get(project=None, user=None).monthly_limit == 7
    assert 'name="monthly_limit" value="7"' in _page(owner)


def test_a_project_cap_holds_in_the_next_round_and_the_rest_goes_on(owner, api, alice):
    render = Project.objects.create(organization=alice, name="render")
    answer = owner.post(f"/dashboard/team/alice/projects/{render.pk}",
                        {"weight": "1", "running_gpu_cap": "2"})
    assert answer.status_code == 302 and load_project_caps() == {("alice", "render"): 2}
    make_node("n1", gpus=8)
    ids = [api.post("/api/v1/jobs", {"prompt": "x", "gpus": 2, "project": project},
                    format="json").json()["id"] for project in ("render", "render", "default")]
    scheduler_tick_run()
    states = {pk: (state, code) for pk, state, code in
              Job.objects.values_list("pk", "state", "pending_code")}
    assert states[ids[0]][0] == states[ids[2]][0] == "SCHEDULED"
    assert states[ids[1]] == ("QUEUED", "project_cap")
    assert api.get(f"/api/v1/jobs/{ids[1]}").json()["pending"]["code"] == "project_cap"
    listed = {p["name"]: p for p in api.get("/api/v1/projects").json()["results"]}
    assert (listed["render"]["running_gpu_cap"], listed["render"]["running_gpus"]) == (2, 2)
    assert (listed["default"]["running_gpu_cap"], listed["default"]["running_gpus"]) == (
        None, 2)
    event = OrganizationEvent.objects.get(action="project.capped")
    assert (event.detail["cap"], event.detail["was"]) == (2, None)
    page = " ".join(_page(owner).split())
    assert "running GPUs 4 of no cap · waiting jobs 1 of no limit" in page
    assert 'render <span class="muted">(2 GPUs running)' in page
    owner.post(f"/dashboard/team/alice/projects/{render.pk}",
               {"weight": "1", "running_gpu_cap": ""})  # blank: no cap of its own
    assert load_project_caps() == {}


@pytest.mark.parametrize("form", [{"weight": "-1"}, {"weight": "2", "monthly_limit": "-5"},
                                  {"weight": "2", "monthly_limit": "lots"},
                                  {"weight": "2", "monthly_limit": str(10**16)},
                                  {"weight": "2", "running_gpu_cap": "-1"},
                                  {"weight": "2", "running_gpu_cap": "lots"},
                                  {"weight": "2", "running_gpu_cap": "100001"},
                                  # digits to isdigit(), not to int()
                                  {"weight": "2", "monthly_limit": "\u00b2"},
                                  {"weight": "2", "monthly_limit": "9" * 4301},
                                  {"weight": "2", "running_gpu_cap": "\u2460"}])
def test_a_refused_save_changes_nothing(owner, alice, form):
    project = Project.objects.create(organization=alice, name="ads", weight=1.5,
                                     running_gpu_cap=3)
    Budget.objects.create(organization=alice, project=project, monthly_limit=10)
    answer = owner.post(f"/dashboard/team/alice/projects/{project.pk}", form)
    assert answer.status_code == 400
    project.refresh_from_db()
    assert (project.weight, project.running_gpu_cap, Budget.objects.get().monthly_limit) == (
        1.5, 3, 10)


def test_the_organization_keeps_an_owner(owner, alice, olga):
    mine = Membership.objects.get(user=olga)
    answer = owner.post(f"/dashboard/team/alice/members/{mine.pk}",
                        {"role": "member", "weight": "1"})
    assert answer.status_code == 409 and "no owner left" in answer.content.decode()
    assert Membership.objects.get(pk=mine.pk).role == "owner"
    # another owner first: then she may step down, and manages nothing after
    mia = Membership.objects.get(user=make_member(alice, "mia"))
    owner.post(f"/dashboard/team/alice/members/{mia.pk}", {"role": "owner", "weight": "1"})
    owner.post(f"/dashboard/team/alice/members/{mine.pk}", {"role": "member", "weight": "1"})
    assert Membership.objects.get(pk=mine.pk).role == "member"
    assert owner.post("/dashboard/team/alice/projects", {"name": "x"}).status_code == 403


@pytest.mark.django_db(transaction=True)
def test_two_owners_stepping_down_at_once_leave_one(alice):
    owners = [Membership.objects.get(user=make_member(alice, name)) for name in ("ann", "bo")]
    for _ in range(5):  # each round a fresh race
        Membership.objects.update(role="owner")
        refused = []
        steps = iter(owners)

        def step_down(steps=steps, refused=refused) -> None:
            mine = next(steps)
            try:
                member_settle(organization=alice, membership_id=mine.pk, user=mine.user,
                              changes={"role": "member"})
            except Conflict:
                refused.append(mine.pk)

        race(step_down, 2)
        assert Membership.objects.filter(organization=alice, role="owner").count() == 1
        assert len(refused) == 1


def test_a_member_looks_and_changes_nothing(client, alice):
    project = Project.objects.create(organization=alice, name="ads")
    client.force_login(make_member(alice, "mia"))
    page = _page(client)
    assert "ads" in page and "Make it" not in page and "Save" not in page
    for path, form in ((f"/dashboard/team/alice/projects/{project.pk}", {"weight": "9"}),
                       ("/dashboard/team/alice/projects", {"name": "mine"}),
                       ("/dashboard/team/alice/credits", {"monthly_limit": "1",
                                                          "low_credits_threshold": "5"})):
        assert client.post(path, form).status_code == 403
    assert Project.objects.get(name="ads").weight == 1.0
    assert Organization.objects.get(pk=alice.pk).low_credits_threshold == 0
    assert not Project.objects.filter(name="mine").exists()
    assert not Budget.objects.exists()


def test_nobody_reaches_another_organizations_team(owner, bob):
    project = Project.objects.create(organization=bob, name="bobs")
    theirs = Membership.objects.get(user=make_member(bob, "ben"))
    assert "bobs" not in _page(owner) and "ben" not in _page(owner)
    assert owner.post("/dashboard/team/bob/projects", {"name": "x"}).status_code == 404
    assert owner.post(f"/dashboard/team/bob/projects/{project.pk}",
                      {"weight": "9"}).status_code == 404
    # its own organization's path with another's ids: no such project or member
    assert owner.post(f"/dashboard/team/alice/projects/{project.pk}",
                      {"weight": "9"}).status_code == 404
    assert owner.post(f"/dashboard/team/alice/members/{theirs.pk}",
                      {"role": "owner"}).status_code == 404
    assert owner.post(f"/dashboard/team/bob/members/{theirs.pk}/remove").status_code == 404
    assert owner.post(f"/dashboard/team/alice/members/{theirs.pk}/remove").status_code == 404
    assert Project.objects.get(pk=project.pk).weight == 1.0
    assert Membership.objects.get(pk=theirs.pk).role == "member"
    assert APIClient().get("/dashboard/team").status_code == 302  # log in first


def test_a_weight_an_operator_set_beyond_the_range_stays_as_the_budget_changes(owner, alice):
    project = Project.objects.create(organization=alice, name="ads", weight=500)
    answer = owner.post(f"/dashboard/team/alice/projects/{project.pk}",
                        {"weight": "500", "monthly_limit": "10"})
    assert answer.status_code == 302
    assert Budget.objects.get(project=project).monthly_limit == 10
    assert owner.post(f"/dashboard/team/alice/projects/{project.pk}",
                      {"weight": "400"}).status_code == 400  # but an owner sets none
    assert Project.objects.get(pk=project.pk).weight == 500


def test_clients_list_the_projects_their_jobs_may_name(owner, api, alice, bob):
    owner.post("/dashboard/team/alice/projects", {"name": "ads", "weight": "2"})
    ads = Project.objects.get(organization=alice, name="ads")
    owner.post(f"/dashboard/team/alice/projects/{ads.pk}", {"weight": "2",
                                                            "monthly_limit": "300"})
    Project.objects.create(organization=bob, name="bobs")
    assert api.get("/api/v1/projects").json()["results"] == [
        {"name": "ads", "weight": 2.0, "running_gpu_cap": None, "running_gpus": 0,
         "monthly_limit": 300},
        {"name": "default", "weight": 1.0, "running_gpu_cap": None, "running_gpus": 0,
         "monthly_limit": None}]


def test_an_owner_takes_out_a_member_who_left_and_their_keys_stop(owner, alice, olga):
    from jobs.services import tenancy
    from tests.support.factories import make_job

    mia = make_member(alice, "mia")
    _, her_key = tenancy.api_key_issue(organization=alice, name="mia's", user=mia)
    _, team_key = tenancy.api_key_issue(organization=alice, name="render", user=olga)
    job = make_job(alice)
    membership = Membership.objects.get(user=mia)
    hers = Client()
    hers.force_login(mia)
    assert hers.get(f"/dashboard/jobs/{job.pk}").status_code == 200
    answer = owner.post(f"/dashboard/team/alice/members/{membership.pk}/remove", follow=True)
    assert "out of alice; 1 of their keys revoked" in answer.content.decode()
    assert not Membership.objects.filter(user=mia).exists()
    assert hers.get(f"/dashboard/jobs/{job.pk}").status_code == 404  # at once
    for raw, status in ((her_key, 401), (team_key, 200)):
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert api.get("/api/v1/jobs").status_code == status
    assert Job.objects.get(pk=job.pk).state == "QUEUED"  # the organization's work stays
    event = OrganizationEvent.objects.get(action="member.removed")
    assert (event.actor, event.detail) == ("olga", {"member": "mia", "keys_revoked": 1})


def test_the_last_owner_cannot_be_taken_out_and_members_take_out_nobody(owner, client,
                                                                        alice, olga):
    mine = Membership.objects.get(user=olga)
    answer = owner.post(f"/dashboard/team/alice/members/{mine.pk}/remove")
    assert answer.status_code == 409 and "no owner left" in answer.content.decode()
    mia = make_member(alice, "mia")
    other = Client()
    other.force_login(mia)
    assert other.post(f"/dashboard/team/alice/members/{mine.pk}/remove").status_code == 403
    assert Membership.objects.filter(organization=alice).count() == 2
    assert not OrganizationEvent.objects.filter(action="member.removed").exists()
