"""Learned run times: the statistics of a project's runs, and what they predict."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.policy.runtimes import MIN_RUNS, P95_Z, WINDOW, RunTimes


def _learned(*seconds: float) -> RunTimes:
    stats = RunTimes()
    for value in seconds:
        stats.add(value)
    return stats


def test_nothing_is_predicted_from_too_few_runs():
    assert _learned(*[60.0] * (MIN_RUNS - 1)).expected_s() is None
    assert _learned(*[60.0] * MIN_RUNS).expected_s() == pytest.approx(60.0)


def test_the_prediction_is_the_lognormal_mean_of_the_runs():
    runs = (30.0, 60.0, 120.0)
    logs = [math.log(s) for s in runs]
    mean = sum(logs) / 3
    variance = sum((x - mean) ** 2 for x in logs) / 3
    assert _learned(*runs).expected_s() == pytest.approx(math.exp(mean + variance / 2))
    assert 60.0 < _learned(*runs).expected_s() < 120.0  # above the median, under the longest


def test_a_project_whose_jobs_change_is_followed():
    stats = _learned(*[600.0] * 100)
    for _ in range(5 * WINDOW):
        stats.add(60.0)
    assert stats.expected_s() == pytest.approx(60.0, rel=0.1)


@given(st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=MIN_RUNS, max_size=80))
def test_the_prediction_stays_within_the_runs_spread(seconds):
    """Never below the shortest run; above the longest by at most its 95th percentile's
    reach (the logs' deviation is at most half their range)."""
    expected = _learned(*seconds).expected_s()
    assert expected is not None
    low, high = min(seconds), max(seconds)
    assert expected >= low * (1 - 1e-9)
    assert expected <= high * (high / low) ** (P95_Z / 2) * (1 + 1e-9)


def test_runs_spread_over_decades_predict_their_95th_percentile_not_their_mean():
    stats = _learned(1.0, 1e5, 1e5)
    assert stats.expected_s() == pytest.approx(
        math.exp(stats.mean_log + P95_Z * math.sqrt(stats.var_log)))
    assert stats.expected_s() < 1e5 * 1e5 ** (P95_Z / 2)
