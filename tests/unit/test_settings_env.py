"""A bad setting stops the start with a message that names the variable."""

import os
import subprocess
import sys

import pytest

from tests.support.processes import ROOT


@pytest.mark.parametrize("name,value", [
    ("DEBUG", "maybe"),
    ("GPUSCHED_TICK_SECONDS", "soon"),
    ("GPUSCHED_LEASE_SECONDS", "-3"),
    ("GPUSCHED_LIMIT_WEIGHT", "-1"),
    ("GPUSCHED_FIRST_KILL_LOSS_RATIO", "-1"),
    ("DATABASE_URL", "mysql://x/y"),
    ("LOG_FORMAT", "xml"),
])
def test_a_bad_value_fails_at_start_naming_the_variable(name, value):
    env = {**os.environ, name: value, "DJANGO_SETTINGS_MODULE": "gpusched.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert name in done.stderr and "bad configuration" in done.stderr


def test_the_first_kill_bound_reaches_the_policy(settings):
    from jobs.scheduler.snapshot import policy_config

    assert policy_config().first_kill_loss_ratio == 16.0
    settings.GPUSCHED_FIRST_KILL_LOSS_RATIO = 0  # off
    assert policy_config().first_kill_loss_ratio is None


def _deploy_check(**env) -> subprocess.CompletedProcess:
    """`manage.py check --deploy`, failing on warnings, with `env` over the test's own."""
    env = {**{k: v for k, v in os.environ.items() if k != "SECRET_KEY"}, **env}
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy",
                           "--fail-level", "WARNING"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


STRONG_KEY = "k" * 20 + "-Zx9!q" * 6  # long and varied, as Django's check asks


def test_production_over_https_passes_djangos_deploy_check():
    done = _deploy_check(DEBUG="false", GPUSCHED_HTTPS="true", SECRET_KEY=STRONG_KEY,
                         ALLOWED_HOSTS="gpusched.example")
    assert done.returncode == 0, done.stderr
    # without HTTPS the check names what is missing: cookies and redirects over TLS
    plain = _deploy_check(DEBUG="false", SECRET_KEY=STRONG_KEY,
                          ALLOWED_HOSTS="gpusched.example")
    assert plain.returncode != 0 and "SESSION_COOKIE_SECURE" in plain.stderr


def test_production_refuses_the_published_development_key():
    done = _deploy_check(DEBUG="false", GPUSCHED_HTTPS="true",
                         ALLOWED_HOSTS="gpusched.example")
    assert done.returncode != 0
    assert "SECRET_KEY" in done.stderr and "bad configuration" in done.stderr


def test_a_database_that_accepts_and_never_answers_is_given_up_on():
    """A failover or a partition that drops packets leaves libpq waiting on the start of a
    connection, which has no end of its own: the node's heartbeat, and the time limit and
    kill it carries out between beats, would hang with it."""
    import socket
    import threading

    import psycopg2

    from gpusched.env import database_from_url

    silent = socket.create_server(("127.0.0.1", 0))  # takes connections, says nothing
    port = silent.getsockname()[1]
    config = database_from_url("DATABASE_URL", f"postgres://u@127.0.0.1:{port}/gpusched")
    outcome: list[BaseException] = []

    def connect() -> None:
        try:
            psycopg2.connect(host=config["HOST"], port=config["PORT"], user=config["USER"],
                             dbname=config["NAME"], **config["OPTIONS"])
        except psycopg2.OperationalError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=connect, daemon=True)
    caller.start()
    caller.join(timeout=60)  # a bound far past connect_timeout: without it, for ever
    silent.close()
    assert not caller.is_alive() and outcome and "timeout" in str(outcome[0]).lower()
