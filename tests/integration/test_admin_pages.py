"""Operators' admin: every model's list and change pages render with real rows."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.urls import reverse

from jobs.models import Attempt, AttemptRank, RunTimeStat, StoredCheckpoint
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = User.objects.create_superuser("olga", "olga@example.com", "pw")
    client.force_login(user)
    return client


def test_every_registered_model_lists_and_opens(operator, alice):
    from credits.models import GpuPrice
    from credits.services.grants import credits_grant

    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=100)  # ledger rows too
    credits_grant(organization=alice, amount=10_000)
    make_node("n1", gpus=2)
    make_job(alice, gpus=1)
    for name in ("n2", "n3"):  # and a gang spanning two nodes, for its ranks
        make_node(name, gpus=2, island="r1")
    make_job(alice, gpus=4)
    RunTimeStat.objects.create(project=alice.projects.get(), gpus=1, runs=3, mean_log=4.0)
    scheduler_tick_run()
    assert AttemptRank.objects.exists()
    attempt = Attempt.objects.first()
    StoredCheckpoint.objects.create(job_id=attempt.job_id, attempt=attempt,
                                    name=f"checkpoints/job-{attempt.job_id}-copy.tar")
    for model in admin.site._registry:
        meta = model._meta
        listing = operator.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        assert listing.status_code == 200, meta.label
        row = model.objects.first()
        if row is not None:
            page = operator.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_change",
                                        args=[row.pk]))
            assert page.status_code == 200, meta.label


def test_every_model_of_ours_is_in_admin():
    from django.apps import apps

    ours = [m for app in ("jobs", "workers", "credits")
            for m in apps.get_app_config(app).get_models()]
    assert [m.__name__ for m in ours if m not in admin.site._registry] == []


def test_a_waiting_jobs_page_shows_its_place_in_line(operator, alice, settings):
    settings.GPUSCHED_POSITIONS_SECONDS = 0  # this round draws the line
    make_node("n1", gpus=1)
    make_job(alice, expected_duration_s=600)
    first, second = make_job(alice), make_job(alice)
    scheduler_tick_run()  # the first job starts; two wait
    page = operator.get(reverse("admin:jobs_job_change", args=[second.pk])).content.decode()
    assert "2 of 2 in line" in page and "fleet work ahead" in page
    page = operator.get(reverse("admin:jobs_job_change", args=[first.pk])).content.decode()
    assert "1 of 2 in line" in page and "fleet work ahead" not in page
