"""PendingReasons: jobs answered one by one or in runs, read as one mapping."""

from __future__ import annotations

from policy_builders import job

from jobs.policy.types import PendingReason, PendingReasons

BUSY = PendingReason("priority", "waiting behind higher-ranked jobs")
CAPPED = PendingReason("org_cap", "organization acme is at its running-GPU cap (4)")
OWN = PendingReason("resources", "needs 8 free GPUs on one node")


def _pending() -> PendingReasons:
    pending = PendingReasons()
    pending.add_run([job(i) for i in range(1, 6)], 2, BUSY)  # jobs 3, 4, 5
    pending.add_run([job(7), job(8)], 0, CAPPED)
    pending.add_run([job(9)], 1, CAPPED)  # an empty tail adds nothing
    pending[4] = OWN
    pending.mark_placed([8])
    return pending


def test_a_run_gives_its_reason_to_the_tail_of_its_list_only() -> None:
    pending = _pending()
    assert set(pending) == {3, 4, 5, 7}
    assert len(pending) == 4
    assert pending[3] is BUSY and pending[7] is CAPPED
    assert 1 not in pending and 9 not in pending


def test_an_answer_of_its_own_wins_and_a_placed_job_has_none() -> None:
    pending = _pending()
    assert pending[4] is OWN
    assert 8 not in pending
    assert [(ids, r.code) for ids, r in pending.runs()] == [([3, 5], "priority"),
                                                           ([7], "org_cap")]


def test_an_answer_set_after_a_lookup_is_seen() -> None:
    pending = _pending()
    assert pending[5] is BUSY  # builds the per-job index
    pending[5] = OWN
    pending[6] = OWN
    assert pending[5] is OWN and pending[6] is OWN and len(pending) == 5
