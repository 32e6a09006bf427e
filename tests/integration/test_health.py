"""Liveness and readiness: /readyz is 503 naming the part that does not answer."""

import pytest

from jobs.scheduler.tick import scheduler_tick_run
from tests.support.broker import purge_broker_and_cache

pytestmark = pytest.mark.django_db


def test_ready_when_database_and_cache_answer(client):
    purge_broker_and_cache()
    body = client.get("/readyz").json()
    assert body == {"ok": True, "problems": {}, "scheduler_last_round_s_ago": None}
    scheduler_tick_run()
    assert 0 <= client.get("/readyz").json()["scheduler_last_round_s_ago"] < 60
    assert client.get("/healthz").json() == {"ok": True}


def test_unready_while_the_cache_does_not_answer(client, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                   "LOCATION": "redis://127.0.0.1:1/0",
                                   "OPTIONS": {"socket_connect_timeout": 0.5}}}
    answer = client.get("/readyz")
    assert answer.status_code == 503
    body = answer.json()
    assert body["ok"] is False and set(body["problems"]) == {"cache"}
    assert "Connection" in body["problems"]["cache"]
    assert client.get("/healthz").status_code == 200  # alive, just not ready


def test_over_https_plain_http_is_redirected_but_for_the_probes(settings, db):
    from django.test import Client

    settings.SECURE_SSL_REDIRECT = True  # as GPUSCHED_HTTPS sets it
    browser = Client()
    assert browser.get("/dashboard/")["Location"].startswith("https://")
    for probe in ("/healthz", "/metrics", "/capacity"):
        assert browser.get(probe).status_code == 200
