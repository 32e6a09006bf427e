"""Tier and organization values the policy cannot rank by are refused, in forms and in the DB."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from jobs.models import Membership, Organization, Project, Tier

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("values", [
    {"weight": 0.0},
    {"guaranteed_share": -0.1},
    {"guaranteed_share": 0.6, "max_share": 0.5},
    {"max_share": 0.0},
    {"max_share": 1.5},
])
def test_a_tier_with_values_out_of_range_is_refused(tiers, values):
    tier = Tier(name="odd", priority=0, **values)
    with pytest.raises(ValidationError):
        tier.full_clean()  # what the admin form runs
    with pytest.raises(IntegrityError), transaction.atomic():
        tier.save()


def test_weights_of_organizations_projects_and_members_must_be_positive(tiers,
                                                                      django_user_model):
    org = Organization(name="Zero", slug="zero", tier=Tier.objects.get(name="free"), weight=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        org.save()
    org.weight = 1.0
    org.save()
    with pytest.raises(IntegrityError), transaction.atomic():
        Project.objects.create(organization=org, name="p", weight=-1)
    user = django_user_model.objects.create_user("zed")
    with pytest.raises(IntegrityError), transaction.atomic():
        Membership.objects.create(user=user, organization=org, weight=0)


def test_the_default_tiers_pass(tiers):
    for tier in Tier.objects.all():
        tier.full_clean()
