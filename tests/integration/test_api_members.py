"""A client's key reads the organization's members and, of scope full, sets their weights,
caps and budgets and takes members out, as owners do on the dashboard: the scheduler and
admission act on it, each change is audited by the key, a refusal changes nothing, and no key
changes who owns the organization."""

import pytest
from rest_framework.test import APIClient

from credits.models import Budget
from jobs.models import ApiKey, Job, Membership, OrganizationEvent
from jobs.scheduler.snapshot import load_user_caps, load_user_weights
from jobs.scheduler.tick import scheduler_tick_run
from jobs.scheduler.usage import user_key
from jobs.services.errors import Forbidden
from jobs.services.team import member_remove, member_settle
from jobs.services.tenancy import api_key_issue
from tests.support.factories import make_member, make_node

pytestmark = pytest.mark.django_db


def _client(org, user=None, scope: str = ApiKey.Scope.FULL) -> APIClient:
    client = APIClient()
    raw = api_key_issue(organization=org, name="k", user=user, scope=scope)[1]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def _settings(user) -> tuple:
    member = Membership.objects.get(user=user)
    budget = Budget.objects.filter(user=user).values_list("monthly_limit", flat=True).first()
    return member.role, member.weight, member.running_gpu_cap, budget


def test_any_key_reads_the_members_with_the_gpus_their_jobs_hold(alice, olga):
    mia = make_member(alice, "mia")
    Budget.objects.create(organization=alice, user=mia, monthly_limit=700)
    make_node("n1", gpus=8)
    _client(alice, mia).post("/api/v1/jobs", {"prompt": "x", "gpus": 2}, format="json")
    scheduler_tick_run()
    reader = _client(alice, scope=ApiKey.Scope.READ)
    listed = reader.get("/api/v1/members").json()["results"]
    assert listed == [
        {"username": "mia", "role": "member", "weight": 1.0, "running_gpu_cap": None,
         "running_gpus": 2, "monthly_limit": 700},
        {"username": "olga", "role": "owner", "weight": 1.0, "running_gpu_cap": None,
         "running_gpus": 0, "monthly_limit": None}]
    assert reader.get("/api/v1/members/mia").json() == listed[0]
    assert reader.get("/api/v1/members/nobody").status_code == 404


def test_a_change_sets_only_what_is_sent_and_the_next_round_holds_it(api, alice):
    mia = make_member(alice, "mia")
    changed = api.patch("/api/v1/members/mia", {"weight": 3, "running_gpu_cap": 1,
                                                "monthly_limit": 500}, format="json")
    assert changed.status_code == 200, changed.content
    assert changed.json() == {"username": "mia", "role": "member", "weight": 3.0,
                              "running_gpu_cap": 1, "running_gpus": 0, "monthly_limit": 500}
    assert load_user_weights()[("alice", user_key(mia.pk))] == 3
    assert load_user_caps() == {("alice", user_key(mia.pk)): 1}
    make_node("n1", gpus=8)
    hers = _client(alice, mia)
    ids = [hers.post("/api/v1/jobs", {"prompt": "x"}, format="json").json()["id"]
           for _ in range(2)]
    scheduler_tick_run()
    assert Job.objects.get(pk=ids[1]).pending_code == "user_cap"
    assert api.patch("/api/v1/members/mia", {"weight": 2}, format="json").json()[
        "running_gpu_cap"] == 1  # what is not sent stays
    cleared = api.patch("/api/v1/members/mia", {"running_gpu_cap": None,
                                                "monthly_limit": None}, format="json")
    assert cleared.json()["running_gpu_cap"] is None and cleared.json()["monthly_limit"] is None
    assert load_user_caps() == {} and not Budget.objects.exists()
    events = list(OrganizationEvent.objects.select_related("api_key").order_by("pk"))
    assert [e.action for e in events] == ["budget.set", "member.changed", "member.changed",
                                          "budget.cleared", "member.changed"]
    assert all(e.api_key.organization_id == alice.pk and e.user is None for e in events)
    assert events[1].detail["changed"] == {"weight": [1.0, 3.0], "running_gpu_cap": [None, 1]}


@pytest.mark.parametrize("body, status, code", [
    ({"role": "owner"}, 400, "not_amendable"),
    ({"weight": 2, "username": "max"}, 400, "not_amendable"),
    ({"weight": 2, "running_gpu_cap": -1}, 400, "cap_out_of_range"),
    ({"weight": 2, "monthly_limit": -5}, 400, "budget_out_of_range"),
    ({"monthly_limit": 5, "weight": 1000}, 400, "weight_out_of_range"),  # after the budget
    ({"weight": "heavy"}, 400, "invalid"),
    (["weight"], 400, "invalid"),
])
def test_a_refused_change_changes_nothing(api, alice, body, status, code):
    mia = make_member(alice, "mia")
    Membership.objects.filter(user=mia).update(weight=1.5, running_gpu_cap=3)
    Budget.objects.create(organization=alice, user=mia, monthly_limit=10)
    answer = api.patch("/api/v1/members/mia", body, format="json")
    assert answer.status_code == status, answer.content
    assert answer.json()["error"]["code"] == code
    assert _settings(mia) == ("member", 1.5, 3, 10)
    assert not OrganizationEvent.objects.exists()


def test_a_key_takes_a_member_out_and_their_keys_with_them(api, alice, olga):
    mia = make_member(alice, "mia")
    hers = _client(alice, mia)
    answer = api.delete("/api/v1/members/mia")
    assert answer.status_code == 200 and answer.json() == {"username": "mia",
                                                           "keys_revoked": 1}
    assert not Membership.objects.filter(user=mia).exists()
    assert hers.get("/api/v1/jobs").status_code == 401
    event = OrganizationEvent.objects.select_related("api_key").get(action="member.removed")
    assert event.user is None and event.api_key.organization_id == alice.pk
    assert api.delete("/api/v1/members/mia").status_code == 404


def test_no_key_changes_who_owns_the_organization(api, alice, olga):
    mia = make_member(alice, "mia")
    key = ApiKey.objects.filter(organization=alice).first()
    taken_out = api.delete("/api/v1/members/olga")
    assert taken_out.status_code == 403 and taken_out.json()["error"]["code"] == "owner_only"
    for who, role in ((mia, "owner"), (olga, "member")):
        with pytest.raises(Forbidden) as refused:
            member_settle(organization=alice, api_key=key, changes={"role": role},
                          membership_id=Membership.objects.get(user=who).pk)
        assert refused.value.code == "owner_only"
    assert _settings(olga)[0] == "owner" and _settings(mia)[0] == "member"
    # the same role again is no change, and an owner's share is the key's to set
    member_settle(organization=alice, api_key=key, changes={"role": "owner", "weight": 2},
                  membership_id=Membership.objects.get(user=olga).pk)
    assert _settings(olga)[:2] == ("owner", 2.0)


def test_narrow_keys_and_other_organizations_change_nothing(alice, bob, olga):
    make_member(alice, "mia")
    jobs_key = _client(alice, scope=ApiKey.Scope.JOBS)
    for answer in (jobs_key.patch("/api/v1/members/mia", {"weight": 5}, format="json"),
                   jobs_key.delete("/api/v1/members/mia")):
        assert answer.status_code == 403
        assert answer.json()["error"]["code"] == "insufficient_scope"
    theirs = _client(bob)
    assert theirs.get("/api/v1/members/mia").status_code == 404
    assert theirs.patch("/api/v1/members/mia", {"weight": 5}, format="json").status_code == 404
    assert theirs.delete("/api/v1/members/mia").status_code == 404
    with pytest.raises(Forbidden):  # the service holds a key to its own organization too
        member_remove(organization=alice, api_key=ApiKey.objects.filter(organization=bob)[0],
                      membership_id=Membership.objects.get(user__username="mia").pk)
    assert Membership.objects.get(user__username="mia").weight == 1.0
    assert Membership.objects.filter(organization=alice).count() == 2
