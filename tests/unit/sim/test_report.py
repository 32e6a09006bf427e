"""The readable table's units."""

from jobs.sim.report import _fmt_s


def test_durations_pick_their_unit_by_size_whatever_their_sign():
    assert _fmt_s(None) == "-"
    assert _fmt_s(90) == "90.0s" and _fmt_s(-90) == "-90.0s"
    assert _fmt_s(600) == "10.0m" and _fmt_s(-600) == "-10.0m"
    assert _fmt_s(2 * 86400) == "48.0h" and _fmt_s(-2 * 86400) == "-48.0h"
