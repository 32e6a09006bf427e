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
    ("DATABASE_URL", "mysql://x/y"),
])
def test_a_bad_value_fails_at_start_naming_the_variable(name, value):
    env = {**os.environ, name: value, "DJANGO_SETTINGS_MODULE": "gpusched.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert name in done.stderr and "bad configuration" in done.stderr
