"""Caps under arbitrary snapshots (test_policy_properties.snapshots): an organization's, a
project's and a member's running-GPU caps hold, and every project_cap and user_cap reason
is true."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from hypothesis import given
from policy_strategies import COMMON, snapshots

from jobs.policy import decide
from jobs.policy.shares import Owned
from jobs.policy.types import Snapshot


@COMMON
@given(snapshots())
def test_org_caps_hold(s: Snapshot) -> None:
    d = decide(s)
    jobs = {j.job_id: j for j in s.queued}
    for org, cap in s.org_gpu_caps.items():
        before = sum(r.gpus for r in s.running if r.org == org)
        added = sum(jobs[p.job_id].gpus for p in d.placements if jobs[p.job_id].org == org)
        assert added == 0 or before + added <= cap


def _caps_hold_and_reasons_are_true(s: Snapshot, key: Callable[[Owned], tuple[str, str]],
                                    caps: dict[tuple[str, str], int], code: str) -> None:
    """Each cap in `caps` holds for the GPUs of its `key` (a cap already passed before the
    round may stay passed, with nothing added), and every reason `code` is true."""
    d = decide(s)
    placed = {p.job_id for p in d.placements}
    held: dict[tuple[str, str], int] = defaultdict(int)
    for r in s.running:
        held[key(r)] += r.gpus
    before = dict(held)
    for j in s.queued:
        if j.job_id in placed:
            held[key(j)] += j.gpus
    for owner, cap in caps.items():
        assert held[owner] == before.get(owner, 0) or held[owner] <= cap
    for j in s.queued:
        if j.job_id in d.pending and d.pending[j.job_id].code == code:
            assert held[key(j)] + j.gpus > caps[key(j)]


@COMMON
@given(snapshots())
def test_project_caps_hold_and_their_reason_is_true(s: Snapshot) -> None:
    _caps_hold_and_reasons_are_true(s, lambda o: (o.org, o.project), s.project_gpu_caps,
                                    "project_cap")


@COMMON
@given(snapshots())
def test_user_caps_hold_and_their_reason_is_true(s: Snapshot) -> None:
    _caps_hold_and_reasons_are_true(s, lambda o: (o.org, o.user), s.user_gpu_caps, "user_cap")
