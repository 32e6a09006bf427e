"""Requests while the database is away (gpusched/database_away.py): new connections refused
and the request's own cut, as in a failover. The API answers 503 database_unavailable with
Retry-After, which the client retries, and the dashboard 503 in words; once the database is
back the same requests succeed, and a submission retried with its key makes one job."""

import pytest
from rest_framework.test import APIClient

from jobs.models import Job
from tests.support.database_cuts import cut_own, database_away
from tests.support.factories import make_member

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_api_and_the_dashboard_answer_503_while_the_database_is_away(alice, api, client):
    client.force_login(make_member(alice, "ann"))
    key = {"HTTP_IDEMPOTENCY_KEY": "order-7"}
    with database_away():
        cut_own()
        answers = [api.get("/api/v1/jobs"),
                   api.post("/api/v1/jobs", {"prompt": "a heron", "gpus": 1}, format="json",
                            **key)]
        page = client.get("/dashboard/")
    for answer in answers:
        assert (answer.status_code, answer["Retry-After"]) == (503, "5")
        assert answer.json()["error"]["code"] == "database_unavailable"
    assert (page.status_code, page["Retry-After"]) == (503, "5")
    assert "database did not answer" in page.content.decode()
    made = api.post("/api/v1/jobs", {"prompt": "a heron", "gpus": 1}, format="json", **key)
    again = APIClient()
    again.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.raw_key}")
    assert made.status_code == 202
    assert again.post("/api/v1/jobs", {"prompt": "a heron", "gpus": 1}, format="json",
                      **key).json()["id"] == made.json()["id"]
    assert Job.objects.count() == 1
    assert client.get("/dashboard/").status_code == 200
