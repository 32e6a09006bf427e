"""Liveness and readiness: /readyz is 503 naming the database when it does not answer, and
ready but degraded while the cache does not (the API serves without it)."""

import pytest

from jobs.scheduler.tick import scheduler_tick_run
from tests.support.broker import purge_broker_and_cache

pytestmark = pytest.mark.django_db


def test_ready_when_database_and_cache_answer(client):
    purge_broker_and_cache()
    body = client.get("/readyz").json()
    assert body == {"ok": True, "problems": {}, "degraded": {},
                    "scheduler_last_round_s_ago": None}
    scheduler_tick_run()
    assert 0 <= client.get("/readyz").json()["scheduler_last_round_s_ago"] < 60
    assert client.get("/healthz").json() == {"ok": True}


def test_ready_but_degraded_while_the_cache_does_not_answer(client, settings):
    settings.CACHES = {"default": {"BACKEND": "gpusched.cache.ForgivingRedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0"}}
    answer = client.get("/readyz")
    assert answer.status_code == 200
    body = answer.json()
    assert body["ok"] is True and body["problems"] == {} and set(body["degraded"]) == {"cache"}
    assert client.get("/healthz").status_code == 200


def test_unready_while_the_database_does_not_answer(client):
    from tests.support.database_cuts import cut_own, database_away

    with database_away():
        cut_own()
        answer = client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["ok"] is False and set(answer.json()["problems"]) == {"database"}
    assert client.get("/healthz").status_code == 200  # alive, just not ready


def test_over_https_plain_http_is_redirected_but_for_the_probes(settings, db):
    from django.test import Client

    settings.SECURE_SSL_REDIRECT = True  # as GPUSCHED_HTTPS sets it
    browser = Client()
    assert browser.get("/dashboard/")["Location"].startswith("https://")
    for probe in ("/healthz", "/metrics", "/capacity"):
        assert browser.get(probe).status_code == 200
