"""A tier's monthly allowance: each of its organizations gets promotional credits once a
calendar month, expiring at the month's end, however often or concurrently beat runs."""

from datetime import UTC, datetime

import pytest

from credits.models import Account, Transfer
from credits.services.allowances import grant_monthly_allowances
from credits.services.grants import expire_buckets
from credits.services.statements import organization_balance
from jobs.models import Tier
from tests.support.ledger import assert_ledger_consistent
from tests.support.threads import race

pytestmark = pytest.mark.django_db(transaction=True)
MID_MAY = datetime(2026, 5, 17, 12, tzinfo=UTC)
MID_JUNE = datetime(2026, 6, 3, 8, tzinfo=UTC)


def test_each_organization_of_the_tier_gets_it_once_a_month(alice, bob):
    Tier.objects.filter(name="free").update(monthly_credits=5_000)  # bob's tier; alice: paid
    assert grant_monthly_allowances(now=MID_MAY) == 1
    assert grant_monthly_allowances(now=MID_MAY) == 0
    bucket = Account.objects.get(organization=bob, bucket="promo")
    assert bucket.available == 5_000
    assert bucket.expires_at == datetime(2026, 6, 1, tzinfo=UTC)
    assert not Account.objects.filter(organization=alice).exists()
    # June: May's leftovers expire, June's allowance arrives
    assert expire_buckets(now=MID_JUNE) == 1
    assert grant_monthly_allowances(now=MID_JUNE) == 1
    assert Account.objects.filter(organization=bob, bucket="promo").count() == 2
    assert Transfer.objects.filter(kind="GRANT").count() == 2
    assert_ledger_consistent()


def test_racing_runs_grant_once(bob):
    Tier.objects.filter(name="free").update(monthly_credits=700)
    race(lambda: grant_monthly_allowances(now=MID_MAY), 4)
    assert Transfer.objects.filter(kind="GRANT").count() == 1
    assert_ledger_consistent()


def test_december_runs_into_january(bob):
    Tier.objects.filter(name="free").update(monthly_credits=1)
    grant_monthly_allowances(now=datetime(2026, 12, 31, 23, tzinfo=UTC))
    expires = Account.objects.get(organization=bob).expires_at
    assert expires == datetime(2027, 1, 1, tzinfo=UTC)
    assert organization_balance(bob)["buckets"][0]["expires_at"] == expires
