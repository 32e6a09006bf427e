"""Tier and policy settings changed from the simulator's command line."""

import pytest

from jobs.policy.types import PolicyConfig
from jobs.sim.cli import main, parser, run
from jobs.sim.model import default_tiers
from jobs.sim.overrides import apply_config, apply_tiers


def test_tier_fields_change_with_their_types():
    tiers = apply_tiers(["free:guaranteed_share=0.05,max_preemptions=2",
                         "paid:preemptible=false"], default_tiers())
    assert tiers["free"].guaranteed_share == 0.05 and tiers["free"].max_preemptions == 2
    assert isinstance(tiers["free"].max_preemptions, int)
    assert tiers["paid"].preemptible is False
    assert tiers["enterprise"] == default_tiers()["enterprise"]


@pytest.mark.parametrize("spec, message", [
    ("gold:priority=400", "no such tier"),
    ("free:floor=0.1", "unknown field 'floor'"),
    ("free:name=x", "unknown field 'name'"),
    ("free:max_preemptions=1.5", "cannot read '1.5' as int"),
    ("free:preemptible=yes", "cannot read 'yes' as bool"),
    ("free", "expected NAME:field=value"),
])
def test_bad_tier_changes_are_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        apply_tiers([spec], default_tiers())


def test_config_fields_change_with_their_types():
    config = apply_config(["reserve_share=0.25", "max_reservations=16", "span_nodes=false",
                           "starve_after_s=none"], PolicyConfig())
    assert (config.reserve_share, config.max_reservations) == (0.25, 16)
    assert config.span_nodes is False and config.starve_after_s is None
    with pytest.raises(ValueError, match="cannot read 'none' as int"):
        apply_config(["max_reservations=none"], PolicyConfig())


def test_command_line_refuses_an_unknown_field(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--trace", "video", "--set", "reserve_fraction=0.3"])
    assert exit_.value.code == 2
    assert "unknown field 'reserve_fraction'" in capsys.readouterr().err


def test_every_policy_runs_with_the_changed_tiers():
    args = parser().parse_args(["--trace", "video", "--nodes", "2", "--horizon", "120",
                                "--load", "1.5", "--policy", "gpusched,fifo",
                                "--tier", "free:guaranteed_share=0.25", "--quiet"])
    for fig in run(args).values():
        assert fig["per_tier"]["free"]["floor"] == 0.25
