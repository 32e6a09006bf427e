"""Caps under arbitrary snapshots (test_policy_properties.snapshots): an organization's, a
project's and a member's running-GPU caps hold, and every project_cap and user_cap reason
is true."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given
from test_policy_properties import COMMON, snapshots

from jobs.policy import decide
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


@COMMON
@given(snapshots())
def test_project_caps_hold_and_their_reason_is_true(s: Snapshot) -> None:
    d = decide(s)
    placed = {p.job_id for p in d.placements}
    held: dict[tuple[str, str], int] = defaultdict(int)
    for r in s.running:
        held[r.org, r.project] += r.gpus
    before = dict(held)
    for j in s.queued:
        if j.job_id in placed:
            held[j.org, j.project] += j.gpus
    for key, cap in s.project_gpu_caps.items():
        assert held[key] == before.get(key, 0) or held[key] <= cap
    for j in s.queued:
        if j.job_id in d.pending and d.pending[j.job_id].code == "project_cap":
            assert held[j.org, j.project] + j.gpus > s.project_gpu_caps[j.org, j.project]


@COMMON
@given(snapshots())
def test_user_caps_hold_and_their_reason_is_true(s: Snapshot) -> None:
    d = decide(s)
    placed = {p.job_id for p in d.placements}
    held: dict[tuple[str, str], int] = defaultdict(int)
    for r in s.running:
        held[r.org, r.user] += r.gpus
    before = dict(held)
    for j in s.queued:
        if j.job_id in placed:
            held[j.org, j.user] += j.gpus
    for key, cap in s.user_gpu_caps.items():
        assert held[key] == before.get(key, 0) or held[key] <= cap
    for j in s.queued:
        if j.job_id in d.pending and d.pending[j.job_id].code == "user_cap":
            assert held[j.org, j.user] + j.gpus > s.user_gpu_caps[j.org, j.user]
