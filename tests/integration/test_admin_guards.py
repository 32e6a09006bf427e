"""Admin is a way around the services: an operator's form must not break what they keep.
Attacked: deleting a job that holds GPUs, editing a running job's request or state, deleting
attempts, bindings or the fencing counter, and a form putting back what a heartbeat wrote
(invariants 1–4, DESIGN.md)."""

import json

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs.models import Attempt, Counter, GpuBinding, Job, JobEvent
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import make_job, make_node
from workers.models import Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    client.force_login(User.objects.create_superuser("olga", "olga@example.com", "pw"))
    return client


def _url(obj, view: str = "change") -> str:
    meta = obj._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=[obj.pk])


def _job_form(job: Job, **values) -> dict:
    """A POST that sets every column of the job, with `values` edited: what a form that let
    operators edit the row would send (read-only fields are left out of the form)."""
    form = {name: "" if value is None else json.dumps(value) if isinstance(value, list | dict)
            else value for name, value in model_to_dict(job, exclude=["output", "after"]).items()}
    form.update(prompt="changed", state="SUCCEEDED", **values)
    for inline in ("attempts", "credit_holds", "events"):
        form.update({f"{inline}-TOTAL_FORMS": 0, f"{inline}-INITIAL_FORMS": 0})
    return form


def test_a_job_holding_gpus_cannot_be_deleted(operator, alice):
    make_node("n1", gpus=2)
    job = make_job(alice, gpus=2)
    scheduler_tick_run()
    assert operator.post(_url(job, "delete"), {"post": "yes"}).status_code == 403
    changelist = reverse("admin:jobs_job_changelist")
    operator.post(changelist, {"action": "delete_selected", "_selected_action": [job.pk],
                               "post": "yes"})
    assert Job.objects.filter(pk=job.pk).exists()
    assert GpuBinding.objects.filter(attempt__job=job, released_at__isnull=True).count() == 2


def test_jobs_are_not_added_in_admin(operator):
    assert operator.get(reverse("admin:jobs_job_add")).status_code == 403


def test_a_running_jobs_form_changes_nothing(operator, alice):
    make_node("n1", gpus=2)
    job = make_job(alice, gpus=2)
    scheduler_tick_run()
    job.refresh_from_db()
    operator.post(_url(job), _job_form(job, gpus=1))
    after = Job.objects.get(pk=job.pk)
    assert (after.state, after.gpus, after.prompt, after.version) == (
        "SCHEDULED", 2, job.prompt, job.version)


@pytest.mark.django_db(transaction=True)
def test_a_waiting_jobs_form_changes_its_request_through_the_amend_service(operator, alice):
    job = make_job(alice, gpus=4)
    answer = operator.post(_url(job), _job_form(job, gpus=2, gpu_types='["A100"]'))
    assert answer.status_code == 302, answer.content.decode()[:2000]
    after = Job.objects.get(pk=job.pk)
    # the request changed, as one compare-and-set with its event; state and prompt did not
    assert (after.gpus, after.gpu_types, after.state, after.prompt) == (
        2, ["A100"], "QUEUED", job.prompt)
    assert after.version == job.version + 1
    assert JobEvent.objects.filter(job=job).last().data == {
        "changed": {"gpus": [4, 2], "gpu_types": [[], ["A100"]]}}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("typed", ["5", '"A100"', "[1]", '[["A100"]]', '[{"a": 1}]'])
def test_gpu_types_of_another_shape_are_refused_and_the_fleet_still_schedules(
        operator, alice, typed):
    make_node("n1", gpus=2)
    job = make_job(alice, gpus=4)  # waits: more than the fleet has
    answer = operator.post(_url(job), _job_form(job, gpu_types=typed), follow=True)
    assert "gpu_types must be a list" in answer.content.decode()
    assert Job.objects.get(pk=job.pk).gpu_types == []
    other = make_job(alice, gpus=1)
    scheduler_tick_run()  # a round over the queue that holds it
    assert Job.objects.get(pk=other.pk).state == "SCHEDULED"


@pytest.mark.parametrize("model", [Attempt, GpuBinding])
def test_attempts_and_bindings_are_shown_never_edited_or_deleted(operator, alice, model):
    make_node("n1", gpus=1)
    make_job(alice)
    scheduler_tick_run()
    row = model.objects.get()
    assert operator.get(_url(row)).status_code == 200
    assert operator.post(_url(row, "delete"), {"post": "yes"}).status_code == 403
    assert operator.post(_url(row), {}).status_code == 403
    assert model.objects.filter(pk=row.pk).exists()


def test_the_fencing_counter_is_never_set_back(operator):
    counter = Counter.objects.create(name="fencing", value=41)
    assert operator.post(_url(counter), {"name": "fencing", "value": 0}).status_code == 403
    assert operator.post(_url(counter, "delete"), {"post": "yes"}).status_code == 403
    assert Counter.objects.get(pk=counter.pk).value == 41


def test_a_nodes_form_writes_what_it_changed_and_not_the_heartbeat(operator):
    node = make_node("n1", gpus=2)
    form = {"region": "eu-west", "island": "", "labels": "{}",
            "gpus-TOTAL_FORMS": 2, "gpus-INITIAL_FORMS": 2,
            **{f"gpus-{i}-id": gpu.pk for i, gpu in enumerate(node.gpus.order_by("index"))},
            **{f"gpus-{i}-node": node.pk for i in range(2)}}
    with CaptureQueriesContext(connection) as queries:
        answer = operator.post(_url(node), form)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    updates = [q["sql"] for q in queries if q["sql"].startswith('UPDATE "workers_node"')]
    assert len(updates) == 1 and "region" in updates[0]
    assert "last_heartbeat" not in updates[0] and '"state"' not in updates[0]
    assert Node.objects.get(pk=node.pk).region == "eu-west"


def test_the_jobs_a_job_runs_after_are_shown_not_chosen(operator, alice):
    from jobs.services.submission import JobSpec, job_submit

    first, other = make_job(alice), make_job(alice)
    then = job_submit(organization=alice, spec=JobSpec(prompt="x", after=(first.pk,)))
    page = operator.get(_url(then)).content.decode()
    assert 'name="after"' not in page  # no widget listing every job
    operator.post(_url(then), {**_job_form(then), "after": [other.pk]})
    assert list(Job.objects.get(pk=then.pk).after.values_list("pk", flat=True)) == [first.pk]


def test_a_view_only_operator_runs_no_action(client, alice):
    """Django offers an action without permissions to whoever may view the list: one who
    may only look must not grant credits, suspend an organization or drain a node."""
    from django.contrib.auth.models import Permission

    from credits.models import Account

    viewer = User.objects.create_user("vera", password="pw-vera-1", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__in=[
        "view_organization", "view_job", "view_node", "view_gpu"]))
    client.force_login(viewer)
    make_node("n1", gpus=2)
    for model, name in ((alice, "grant_credits"), (Node.objects.get(), "drain")):
        listed = client.get(reverse(f"admin:{model._meta.app_label}_"
                                    f"{model._meta.model_name}_changelist"))
        assert listed.status_code == 200 and f'value="{name}"' not in listed.content.decode()
    client.post(reverse("admin:jobs_organization_changelist"), {
        "action": "grant_credits", "_selected_action": [alice.pk], "apply": "Grant",
        "amount": "1000", "memo": "", "key": "", "expires_in_days": ""})
    client.post(reverse("admin:workers_node_changelist"), {
        "action": "drain", "_selected_action": [Node.objects.get().pk]})
    assert not Account.objects.filter(organization=alice, credits_posted__gt=0).exists()
    assert Node.objects.get().state == "ACTIVE"
