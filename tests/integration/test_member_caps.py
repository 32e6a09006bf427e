"""An owner bounds one member's running GPUs over all the organization's projects on the team
page: the next round holds it, the job says why it waits, colleagues' jobs go on, and a
refused cap changes nothing."""

import pytest
from rest_framework.test import APIClient

from jobs.models import Job, Membership, OrganizationEvent, Project
from jobs.scheduler.snapshot import load_user_caps
from jobs.scheduler.tick import scheduler_tick_run
from jobs.scheduler.usage import user_key
from jobs.services.tenancy import api_key_issue
from tests.support.factories import make_member, make_node

pytestmark = pytest.mark.django_db


def _client_of(org, user) -> APIClient:
    client = APIClient()
    raw = api_key_issue(organization=org, name=user.get_username(), user=user)[1]
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def test_a_members_cap_holds_over_all_projects_and_colleagues_go_on(owner, alice):
    Project.objects.create(organization=alice, name="train")
    mia, max_ = make_member(alice, "mia"), make_member(alice, "max")
    membership = Membership.objects.get(user=mia)
    answer = owner.post(f"/dashboard/team/alice/members/{membership.pk}",
                        {"role": "member", "weight": "1", "running_gpu_cap": "2"})
    assert answer.status_code == 302
    assert load_user_caps() == {("alice", user_key(mia.pk)): 2}
    make_node("n1", gpus=8)
    hers, his = _client_of(alice, mia), _client_of(alice, max_)
    ids = [hers.post("/api/v1/jobs", {"prompt": "x", "gpus": 1, "project": project},
                     format="json").json()["id"] for project in ("default", "train", "train")]
    theirs = his.post("/api/v1/jobs", {"prompt": "x", "gpus": 2}, format="json").json()["id"]
    scheduler_tick_run()
    states = dict(Job.objects.values_list("pk", "state"))
    assert [states[i] for i in ids] == ["SCHEDULED", "SCHEDULED", "QUEUED"]
    assert states[theirs] == "SCHEDULED"
    pending = hers.get(f"/api/v1/jobs/{ids[2]}").json()["pending"]
    assert pending["code"] == "user_cap" and "running-GPU cap in alice (2)" in pending["reason"]
    event = OrganizationEvent.objects.get(action="member.changed")
    assert event.detail["changed"] == {"running_gpu_cap": [None, 2]}
    assert 'name="running_gpu_cap" value="2"' in owner.get("/dashboard/team").content.decode()
    owner.post(f"/dashboard/team/alice/members/{membership.pk}",
               {"role": "member", "weight": "1", "running_gpu_cap": ""})  # blank: no cap
    assert load_user_caps() == {}


@pytest.mark.parametrize("cap", ["-1", "lots", "100001"])
def test_a_refused_cap_changes_nothing(owner, alice, cap):
    mia = make_member(alice, "mia")
    membership = Membership.objects.get(user=mia)
    Membership.objects.filter(pk=membership.pk).update(running_gpu_cap=3, weight=2)
    answer = owner.post(f"/dashboard/team/alice/members/{membership.pk}",
                        {"role": "owner", "weight": "5", "running_gpu_cap": cap})
    assert answer.status_code == 400
    membership.refresh_from_db()
    assert (membership.running_gpu_cap, membership.weight, membership.role) == (3, 2, "member")
