"""A member downloads a month's statement as CSV: every transfer in or out of the
organization's wallets that month, oldest first, as the API lists them; a cell a spreadsheet
would run as a formula stays text; nobody reads another organization's."""

import csv
import io

import pytest

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from jobs.services.cancellation import job_cancel
from tests.support.factories import make_job, make_member

pytestmark = pytest.mark.django_db


@pytest.fixture
def mia(client, alice):
    client.force_login(make_member(alice, "mia"))
    return client


def _rows(answer) -> list[dict]:
    text = b"".join(answer.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_the_months_transfers_oldest_first_as_the_api_lists_them(mia, api, alice):
    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3_600)
    credits_grant(organization=alice, amount=10_000, memo="=HYPERLINK(\"http://x\")")
    job_cancel(job=make_job(alice, gpus=2))  # a hold, then voided
    answer = mia.get("/dashboard/credits/alice/statement.csv")
    assert answer.status_code == 200 and answer["Content-Type"] == "text/csv"
    assert answer["Content-Disposition"].startswith('attachment; filename="alice-credits-')
    rows = _rows(answer)
    listed = api.get("/api/v1/credits/transfers").json()["results"][::-1]
    assert [(int(r["id"]), r["kind"], r["direction"], r["bucket"], int(r["amount"]))
            for r in rows] == [(t["id"], t["kind"], t["direction"], t["bucket"], t["amount"])
                               for t in listed]
    assert len(rows) >= 3 and rows[0]["memo"] == "'=HYPERLINK(\"http://x\")"
    assert {r["job"] for r in rows[1:]} == {str(listed[-1]["job"])}


def test_another_month_has_its_own_transfers_only(mia, alice):
    credits_grant(organization=alice, amount=10)
    assert _rows(mia.get("/dashboard/credits/alice/statement.csv?month=2001-01")) == []


@pytest.mark.parametrize("month", ["2026-13", "26-01", "last", "0000-01", "1999-12",
                                   "9999-12"])
def test_a_bad_month_is_a_400(mia, month):
    assert mia.get(f"/dashboard/credits/alice/statement.csv?month={month}").status_code == 400


def test_nobody_reads_another_organizations_statement(mia, bob):
    credits_grant(organization=bob, amount=10)
    assert mia.get("/dashboard/credits/bob/statement.csv").status_code == 404
