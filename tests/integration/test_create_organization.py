"""An operator's script onboards an organization: `manage.py create_organization` makes it
with its default project, and prints once the link that makes its first owner and a key its
clients use at once; a slug taken, a tier unknown or a slug malformed makes nothing."""

import io
import re

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from jobs.models import ApiKey, Invitation, Membership, Organization, OrganizationEvent

pytestmark = pytest.mark.django_db


def _create(*args: str) -> str:
    out = io.StringIO()
    call_command("create_organization", *args, stdout=out)
    return out.getvalue()


def test_an_organization_is_onboarded_with_its_first_owner_and_a_key(tiers, client):
    said = _create("acme", "--tier", "paid", "--name", "Acme Films", "--invite-owner",
                   "--key", "ci", "--scope", "jobs", "--url", "https://gpus.example/")
    org = Organization.objects.get(slug="acme")
    assert (org.name, org.tier.name, [p.name for p in org.projects.all()]) == (
        "Acme Films", "paid", ["default"])
    link = re.search(r"https://gpus\.example(/dashboard/join/\S+)", said).group(1)
    joined = client.post(link, {"username": "ada", "password": "a long horse battery"})
    assert joined.status_code == 302
    assert Membership.objects.get(organization=org).role == "owner"
    assert client.post(link, {"username": "eve", "password": "a long horse battery"}
                       ).status_code == 410  # once
    raw = re.search(r"(gs_\S+)", said).group(1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    answer = api.get("/api/v1/organization").json()
    assert (answer["slug"], answer["key"]["scope"]) == ("acme", "jobs")
    assert OrganizationEvent.objects.get(action="member.invited").actor == "an operator"


@pytest.mark.parametrize("args, refusal", [
    (("alice", "--tier", "paid", "--key", "ci"), "exists already"),
    (("zed", "--tier", "gold", "--key", "ci"), "no tier 'gold'"),
    (("Bad Slug", "--tier", "paid"), "a slug is"),
    (("zed", "--tier", "paid", "--key", " "), "a key's name"),
])
def test_a_refused_onboarding_makes_nothing(alice, args, refusal):
    keys = ApiKey.objects.count()
    with pytest.raises(CommandError, match=refusal):
        _create(*args)
    assert list(Organization.objects.values_list("slug", flat=True)) == ["alice"]
    assert ApiKey.objects.count() == keys and not Invitation.objects.exists()
