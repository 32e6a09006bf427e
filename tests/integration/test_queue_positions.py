"""Every waiting job's place in line: drawn by the tick from its snapshot, published in the
cache, shown by the API and the dashboard; a reader sees one line, never a mix of two."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.models import Job, Membership
from jobs.scheduler.positions import (
    EARLY_COST_FACTOR,
    last_publication,
    positions_due,
    publish_positions,
    queue_positions,
)
from jobs.scheduler.snapshot import load_snapshot
from jobs.scheduler.tick import scheduler_tick_run
from jobs.services.cancellation import job_cancel
from tests.support.factories import make_job, make_node

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_cache")]



def _places(jobs: list[Job]) -> list[int | None]:
    found = queue_positions(j.pk for j in jobs)
    return [found[j.pk].position if j.pk in found else None for j in jobs]


def _publish(started: frozenset[int] = frozenset()) -> int:
    return publish_positions(load_snapshot(timezone.now()), started)


def test_tiers_and_fair_share_order_the_line(alice, bob) -> None:
    heavy = [make_job(alice) for _ in range(4)]  # paid, one org with many jobs
    free = make_job(bob)
    assert _publish() == 5
    assert _places(heavy) == [1, 2, 3, 4] and _places([free]) == [5]
    bob.tier = alice.tier  # the same tier: bob's one job goes second, behind alice's first
    bob.save(update_fields=["tier"])
    _publish()
    assert _places([*heavy, free]) == [1, 3, 4, 5, 2]
    assert {p.length for p in queue_positions(j.pk for j in heavy).values()} == {5}


def test_a_new_line_replaces_the_old_one_whole(alice) -> None:
    jobs = [make_job(alice) for _ in range(3)]
    _publish()
    job_cancel(job=jobs[0])
    late = make_job(alice)
    assert _places([*jobs, late]) == [1, 2, 3, None]  # as drawn, until the next line
    _publish(started=frozenset({jobs[1].pk}))
    assert _places([*jobs, late]) == [None, None, 1, 2]
    assert queue_positions([late.pk])[late.pk].length == 2


def test_the_tick_draws_the_line_every_period_and_sooner_for_a_new_job(alice,
                                                                        settings) -> None:
    make_node("n1", gpus=1)
    jobs = [make_job(alice) for _ in range(3)]
    scheduler_tick_run()  # one starts; the other two are in line
    assert Job.objects.get(pk=jobs[0].pk).state == "SCHEDULED"
    assert _places(jobs) == [None, 1, 2]
    drawn = last_publication()
    time.sleep(EARLY_COST_FACTOR * drawn["ms"] / 1000 + 0.01)
    scheduler_tick_run()  # nothing arrived: no line before the period
    assert last_publication()["gen"] == drawn["gen"]
    assert not positions_due(timezone.now().timestamp())
    later = make_job(alice)  # an arrival brings the next line forward
    scheduler_tick_run()
    assert _places([later]) == [3] and last_publication()["gen"] != drawn["gen"]
    job_cancel(job=jobs[2])  # a departure does not: its place goes with the period
    drawn = last_publication()
    time.sleep(EARLY_COST_FACTOR * drawn["ms"] / 1000 + 0.01)
    scheduler_tick_run()
    assert _places([jobs[1], later]) == [1, 3]
    settings.GPUSCHED_POSITIONS_SECONDS = 0
    scheduler_tick_run()
    assert _places([jobs[1], later]) == [1, 2]


def test_the_work_ahead_is_what_the_jobs_ahead_would_keep_the_fleet_busy(alice, client) -> None:
    make_node("n1", gpus=4)
    running = make_job(alice, gpus=4)
    first = make_job(alice, gpus=4, expected_duration_s=600)  # its estimate counts
    second = make_job(alice, gpus=2)  # its time limit would, an hour
    third = make_job(alice, gpus=1)
    scheduler_tick_run()
    assert Job.objects.get(pk=running.pk).state == "SCHEDULED"
    found = queue_positions([first.pk, second.pk, third.pk])
    assert [found[j.pk].ahead_s for j in (first, second, third)] == [0.0, 600.0, 2400.0]
    user = get_user_model().objects.create_user("ann", password="pw-ann-1")
    Membership.objects.create(user=user, organization=alice)
    client.force_login(user)
    assert "3 of 3 in line, 40 min of fleet work ahead" in client.get(
        f"/dashboard/jobs/{third.pk}").content.decode()


def test_no_line_under_another_policy(alice, settings) -> None:
    settings.GPUSCHED_POLICY = "fifo"
    job = make_job(alice)
    scheduler_tick_run()
    assert queue_positions([job.pk]) == {}


def test_the_api_shows_the_place_of_a_waiting_job(api, alice) -> None:
    first, second = make_job(alice, gpus=2), make_job(alice)
    assert api.get(f"/api/v1/jobs/{first.pk}").json()["pending"]["position"] is None
    scheduler_tick_run()  # no node: both wait
    position = api.get(f"/api/v1/jobs/{second.pk}").json()["pending"]["position"]
    assert position["place"] == 2 and position["of"] == 2 and position["as_of"]
    assert position["ahead_s"] is None  # no GPU is schedulable: no fleet to divide by
    listed = {j["id"]: j["pending"]["position"]["place"]
              for j in api.get("/api/v1/jobs").json()["results"]}
    assert listed == {first.pk: 1, second.pk: 2}


def test_the_queue_lists_the_organizations_waiting_jobs_in_line(api, alice, bob) -> None:
    heavy = [make_job(alice, gpus=2) for _ in range(3)]
    bob.tier = alice.tier  # bob's one job goes second in line, and alice never sees it
    bob.save(update_fields=["tier"])
    make_job(bob)
    assert api.get("/api/v1/queue").json() == {
        "of": None, "as_of": None, "waiting": 3, "in_line": 0, "results": []}
    scheduler_tick_run()  # no node: all wait
    late = make_job(alice)  # no place until the next line
    body = api.get("/api/v1/queue?limit=2").json()
    assert (body["of"], body["waiting"], body["in_line"]) == (4, 4, 3) and body["as_of"]
    assert body["results"] == [{"id": heavy[0].pk, "gpus": 2, "place": 1, "ahead_s": None},
                               {"id": heavy[1].pk, "gpus": 2, "place": 3, "ahead_s": None}]
    assert late.pk not in [r["id"] for r in api.get("/api/v1/queue").json()["results"]]
    refused = api.get("/api/v1/queue?limit=0")
    assert refused.status_code == 400 and refused.json()["error"]["code"]


def test_the_list_reads_every_place_at_once(api, alice, django_assert_num_queries) -> None:
    for _ in range(30):
        make_job(alice)
    scheduler_tick_run()
    # key, organization and its tier (throttle), the page, the jobs they run after: no read
    # per job
    with django_assert_num_queries(4):
        results = api.get("/api/v1/jobs").json()["results"]
    assert sorted(j["pending"]["position"]["place"] for j in results) == list(range(1, 31))


def test_the_dashboard_shows_the_place(client, alice) -> None:
    user = get_user_model().objects.create_user("ann", password="pw-ann-1")
    Membership.objects.create(user=user, organization=alice)
    client.force_login(user)
    jobs = [make_job(alice) for _ in range(2)]
    scheduler_tick_run()
    assert "2 of 2 in line" in client.get("/dashboard/").content.decode()
    assert "1 of 2 in line" in client.get(f"/dashboard/jobs/{jobs[0].pk}").content.decode()


def test_the_place_in_words() -> None:
    from jobs.scheduler.positions import QueuePosition

    assert QueuePosition(1, 1240, 0.0, 0.0).words() == "1 of 1,240 in line"
    assert QueuePosition(12, 1240, 0.0, None).words() == "12 of 1,240 in line"
    assert QueuePosition(2, 3, 0.0, 45.0).words() == "2 of 3 in line, 45 s of fleet work ahead"
    assert QueuePosition(2, 3, 0.0, 5399.0).words() == "2 of 3 in line, 90 min of fleet work ahead"
    assert QueuePosition(2, 3, 0.0, 5400.0).words() == "2 of 3 in line, 1.5 h of fleet work ahead"
