"""What an organization sees of its credits, and how operators grant them."""

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from credits.models import GpuPrice, Transfer
from credits.services.grants import credits_grant
from credits.services.statements import organization_balance
from jobs.services.submission import JobSpec, job_submit

pytestmark = pytest.mark.django_db


def test_the_balance_shows_buckets_holds_and_transfers(alice, api, bob):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    credits_grant(organization=alice, amount=1_000, memo="invoice 17")
    credits_grant(organization=alice, amount=200, promo=True,
                  expires_at="2099-01-01T00:00:00Z")
    credits_grant(organization=bob, amount=5)
    job = job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=300))
    body = api.get("/api/v1/credits").json()
    assert (body["available"], body["held"]) == (900, 300)
    assert [(b["bucket"], b["available"], b["held"]) for b in body["buckets"]] == [
        ("promo", 0, 200), ("paid", 900, 100)]
    assert [(t["kind"], t["amount"], t["direction"], t["bucket"], t["job"])
            for t in body["transfers"]] == [
        ("HOLD", 100, "out", "paid", job.pk), ("HOLD", 200, "out", "promo", job.pk),
        ("GRANT", 200, "in", "promo", None), ("GRANT", 1_000, "in", "paid", None)]


def test_an_organization_without_credits_sees_none(api):
    assert api.get("/api/v1/credits").json() == {
        "available": 0, "held": 0, "buckets": [], "budgets": [], "transfers": []}


def test_the_balance_needs_a_key():
    assert APIClient().get("/api/v1/credits").status_code == 401


def test_operators_grant_with_a_command(alice, capsys):
    call_command("grant_credits", "alice", "5000", "--key", "inv-1")
    call_command("grant_credits", "alice", "5000", "--key", "inv-1")  # a retry: once
    call_command("grant_credits", "alice", "300", "--promo", "--days", "30")
    assert "5300 available" in capsys.readouterr().out.splitlines()[-1]
    assert Transfer.objects.filter(kind="GRANT").count() == 2
    with pytest.raises(CommandError):
        call_command("grant_credits", "nobody", "5")
    with pytest.raises(CommandError):
        call_command("grant_credits", "alice", "-5")


def test_operators_grant_from_the_organization_list(alice, bob, client):
    client.force_login(User.objects.create_superuser("olga", "o@example.com", "pw"))
    chosen = {"action": "grant_credits", "_selected_action": [alice.pk, bob.pk]}
    form = client.post("/admin/jobs/organization/", chosen)
    assert form.status_code == 200 and "Grant credits to 2 organizations" in form.content.decode()
    refused = client.post("/admin/jobs/organization/", {**chosen, "apply": "1", "amount": "5",
                                                        "expires_in_days": "3"})
    assert "only promotional credits expire" in refused.content.decode()
    far = client.post("/admin/jobs/organization/", {**chosen, "apply": "1", "amount": "5",
                                                    "promo": "on", "expires_in_days": "4e6"})
    assert far.status_code == 200 and not Transfer.objects.filter(kind="GRANT").exists()
    for _ in range(2):  # the same key twice: granted once
        client.post("/admin/jobs/organization/", {**chosen, "apply": "1", "amount": "750",
                                                  "key": "order-9"}, follow=True)
    assert Transfer.objects.filter(kind="GRANT").count() == 2
    assert [organization_balance(o)["available"] for o in (alice, bob)] == [750, 750]
    from jobs.models import OrganizationEvent

    granted = OrganizationEvent.objects.filter(action="credits.granted")
    assert sorted((e.organization_id, e.user.username) for e in granted) == sorted(
        [(alice.pk, "olga"), (bob.pk, "olga")])  # who granted, once each


def test_the_statement_pages_through_every_transfer_and_filters(alice, api, bob):
    from jobs.services.cancellation import job_cancel

    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)
    for i in range(3):
        credits_grant(organization=alice, amount=1_000 + i)
    credits_grant(organization=bob, amount=5)
    job = job_submit(organization=alice, spec=JobSpec(prompt="x", time_limit_s=300))
    job_cancel(job=job)
    first = api.get("/api/v1/credits/transfers?limit=2").json()
    assert [t["kind"] for t in first["results"]] == ["VOID", "HOLD"]
    second = api.get(first["next"]).json()  # the limit travels with the cursor
    assert [t["amount"] for t in second["results"]] == [1_002, 1_001]
    last = api.get(second["next"]).json()
    assert [t["amount"] for t in last["results"]] == [1_000] and last["next"] is None
    by_job = api.get(f"/api/v1/credits/transfers?job={job.pk}").json()["results"]
    assert {t["kind"] for t in by_job} == {"HOLD", "VOID"}
    grants = api.get("/api/v1/credits/transfers?kind=GRANT").json()["results"]
    assert len(grants) == 3  # bob's is not alice's
    assert api.get("/api/v1/credits/transfers?kind=GIFT").status_code == 400


def test_an_invoice_granted_by_script_and_again_in_admin_is_granted_once(alice, client):
    call_command("grant_credits", "alice", "750", "--key", "inv-7")
    client.force_login(User.objects.create_superuser("olga", "o@example.com", "pw"))
    answer = client.post("/admin/jobs/organization/", {
        "action": "grant_credits", "_selected_action": [alice.pk], "apply": "1",
        "amount": "750", "key": "inv-7"}, follow=True)
    assert answer.status_code == 200
    assert Transfer.objects.filter(kind="GRANT").count() == 1
    assert organization_balance(alice)["available"] == 750
    # in the organization's audit trail once, by no one (the script), as granted
    from jobs.models import OrganizationEvent

    (event,) = OrganizationEvent.objects.filter(action="credits.granted")
    assert (event.user, event.detail["credits"], event.detail["key"]) == (
        None, 750, "inv-7:alice")
    with pytest.raises(CommandError, match="another grant"):  # promotional, not paid
        call_command("grant_credits", "alice", "750", "--key", "inv-7", "--promo")


def test_an_invoice_the_command_granted_under_its_bare_key_is_not_granted_again(alice):
    """As the command recorded keys before they named their organization."""
    from credits.services.grants import credits_grant

    credits_grant(organization=alice, amount=750, idempotency_key="inv-3")  # as it did
    call_command("grant_credits", "alice", "750", "--key", "inv-3")
    assert Transfer.objects.filter(kind="GRANT").count() == 1
