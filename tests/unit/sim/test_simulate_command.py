"""`manage.py simulate`: the simulator behind Django's command line and call_command."""

import json

import pytest
from django.core.management import CommandError, call_command

from jobs.management.commands.simulate import Command

ARGS = ["--trace", "video", "--policy", "gpusched,fifo", "--nodes", "2", "--horizon", "120",
        "--quiet"]


def test_the_command_line_hands_every_option_to_the_simulator(tmp_path):
    out = tmp_path / "run.json"
    with pytest.raises(SystemExit) as done:
        Command().run_from_argv(["manage.py", "simulate", *ARGS, "--json", str(out)])
    assert done.value.code == 0
    assert set(json.loads(out.read_text())["results"]) == {"gpusched", "fifo"}


def test_call_command_takes_the_simulators_options_after_a_double_dash(tmp_path):
    out = tmp_path / "run.json"
    call_command("simulate", "--", *ARGS, "--json", str(out))
    assert set(json.loads(out.read_text())["results"]) == {"gpusched", "fifo"}


def test_a_simulator_option_is_never_taken_for_one_of_djangos(tmp_path):
    # --trace once read as an abbreviation of Django's --traceback: the run went on without it
    with pytest.raises(CommandError, match="--trace"):
        call_command("simulate", *ARGS)
