"""A client's urgency moves a job ahead of its own user's jobs in the project, and ahead of
nobody else's: not another user's, project's or org's, not even on a tie of shares."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from policy_builders import job, node, placed, snap

from jobs.policy import decide
from jobs.policy.line import start_order
from jobs.policy.types import PolicyConfig


def one_gpu_free():
    return [node("n0", 1)]


def test_an_urgent_job_goes_ahead_of_its_users_older_jobs() -> None:
    queued = [job(1, wait=900), job(2, wait=600), job(3, wait=0, urgency_s=3600)]
    assert list(placed(decide(snap(one_gpu_free(), queued=queued)))) == [3]
    queued[2] = job(3, wait=0, urgency_s=300)  # not as much as the oldest waited
    assert list(placed(decide(snap(one_gpu_free(), queued=queued)))) == [1]


def test_urgency_wins_no_tie_against_another_user_project_or_org() -> None:
    for other in ({"user": "v"}, {"project": "q"}, {"org": "b"}):
        older = job(1, wait=100, **other)
        urgent = job(2, wait=0, urgency_s=86_400)
        # equal shares (no usage, nothing running): the tie goes as it would without urgency
        assert list(placed(decide(snap(one_gpu_free(), queued=[urgent, older])))) == [1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("uv"), st.integers(0, 3600),
                          st.sampled_from([0, 0, 600, 86_400])), min_size=1, max_size=12))
def test_urgency_reorders_only_inside_each_users_jobs(spec) -> None:
    """The line with urgency is the line without it, each user's places refilled by that
    user's jobs in urgent order (ties in the queue's order)."""
    config = PolicyConfig()
    queued = [job(i, user=u, wait=w, urgency_s=float(x)) for i, (u, w, x) in enumerate(spec)]
    plain = [job(i, user=u, wait=w) for i, (u, w, _) in enumerate(spec)]
    line = start_order(snap(one_gpu_free(), queued=queued, config=config))
    plain_line = start_order(snap(one_gpu_free(), queued=plain, config=config))
    assert [j.user for j in line] == [j.user for j in plain_line]

    def deadline(j) -> float:
        return j.enqueued_at + config.limit_weight * j.time_limit_s

    queue_order = [j.job_id for j in sorted(queued, key=deadline)]
    for user in "uv":
        mine = sorted((j for j in queued if j.user == user),
                      key=lambda j: (deadline(j) - j.urgency_s, queue_order.index(j.job_id)))
        assert [j.job_id for j in line if j.user == user] == [j.job_id for j in mine]
