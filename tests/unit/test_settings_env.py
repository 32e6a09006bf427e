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
