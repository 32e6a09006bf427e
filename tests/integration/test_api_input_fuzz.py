"""Any body or query a client can send (a submission, a job's change, a list, a summary, a
webhook, a log question, a bulk cancel, erase, hold or release) gets its answer or a 4xx with a
code, never a 500; only an accepted submission leaves a job behind, and a refused change
leaves the job as it was (invariant 1, and bad input is the client's error)."""

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.models import Job
from tests.support.request_bodies import bodies, numbers, text, values, with_prompt

pytestmark = pytest.mark.django_db

@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(with_prompt, with_prompt, with_prompt, bodies, values))
def test_any_body_is_accepted_or_refused_with_a_code(api, body):
    before = Job.objects.count()
    response = api.post("/api/v1/jobs", json.dumps(body), content_type="application/json")
    after = Job.objects.count()
    assert response.status_code in (202, 400), response.content[:300]
    if response.status_code == 202:
        assert after == before + 1
        job = api.get(response.json()["url"]).json()
        # a number is taken as its text, as DRF's CharField takes it, without outer spaces
        # HELD after a job of the organization's that a random id happened to name
        assert job["state"] in ("QUEUED", "HELD")
        assert job["prompt"] == str(body["prompt"]).strip()
        assert job["labels"] == body.get("labels", {})  # strings only, kept as sent
    else:
        assert after == before
        assert response.json()["error"]["code"]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(with_prompt, with_prompt, bodies, values))
def test_any_body_dry_run_is_answered_with_a_code_and_leaves_nothing(api, body):
    response = api.post("/api/v1/jobs?dry_run=true", json.dumps(body),
                        content_type="application/json")
    assert response.status_code in (200, 400), response.content[:300]
    assert Job.objects.count() == 0
    answer = response.json()
    assert answer["state"] in ("QUEUED", "HELD") if response.status_code == 200 \
        else answer["error"]["code"]


@pytest.mark.parametrize("raw,code", [
    ('{"prompt": "x", "params": {"a": "nul\\u0000"}}', "params_not_storable"),
    ('{"prompt": "x", "params": {"nul\\u0000": 1}}', "params_not_storable"),
    ('{"prompt": "x", "params": {"a": ["\\udfff"]}}', "params_not_storable"),
    ('{"prompt": "x", "min_gpu_memory_mb": 100000000000000000000}',
     "min_gpu_memory_out_of_range"),
    ('{"prompt": "x", "params": ' + "[" * 100_000 + "]" * 100_000 + "}", "malformed_request"),
    ('{"prompt": "x", "after": [100000000000000000000000000000000000000000]}',
     "unknown_dependency"),
    ('{"prompt": "x", "after": [9223372036854775808]}', "unknown_dependency"),
])
def test_what_the_database_can_not_store_is_a_400(api, raw, code):
    response = api.post("/api/v1/jobs", raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert Job.objects.count() == 0


# what the node agent reads itself: a seed int() refuses would fail every try on a node after
# the job started, and a suffix that is a path would write the output in another job's files
@pytest.mark.parametrize("raw,code", [
    ('{"prompt": "x", "params": {"seed": "abc"}}', "invalid_seed"),
    ('{"prompt": "x", "params": {"seed": null}}', "invalid_seed"),
    ('{"prompt": "x", "params": {"seed": 1.5}}', "invalid_seed"),
    ('{"prompt": "x", "params": {"seed": true}}', "invalid_seed"),
    ('{"prompt": "x", "params": {"seed": -1}}', "invalid_seed"),
    ('{"prompt": "x", "params": {"seed": 9223372036854775808}}', "invalid_seed"),
    ('{"prompt": "x", "params": {"seed": "' + "9" * 5000 + '"}}', "invalid_seed"),
    ('{"prompt": "x", "params": {"seed": ' + "9" * 4000 + '}}', "invalid_seed"),
    ('{"prompt": "x", "params": {"output_suffix": "/../../../job-123/checkpoint/x"}}',
     "invalid_output_suffix"),
    ('{"prompt": "x", "params": {"output_suffix": "/x"}}', "invalid_output_suffix"),
    ('{"prompt": "x", "params": {"output_suffix": ".mp4\\n"}}', "invalid_output_suffix"),
    ('{"prompt": "x", "params": {"output_suffix": "mp4"}}', "invalid_output_suffix"),
    ('{"prompt": "x", "params": {"output_suffix": ".abcdefghijk"}}', "invalid_output_suffix"),
    ('{"prompt": "x", "params": {"output_suffix": null}}', "invalid_output_suffix"),
    ('{"prompt": "x", "params": {"output_suffix": 4}}', "invalid_output_suffix"),
])
def test_a_param_the_node_agent_can_not_use_is_a_400(api, raw, code):
    response = api.post("/api/v1/jobs", raw, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert "params" in response.json()["error"]["fields"]
    assert Job.objects.count() == 0


def test_an_integer_seed_and_a_plain_suffix_are_accepted(api):
    for params in ({"seed": 0}, {"seed": "42"}, {"seed": 2**63 - 1, "output_suffix": ".mp4"},
                   {"output_suffix": ".Y4M"}):
        response = api.post("/api/v1/jobs", {"prompt": "x", "params": params}, format="json")
        assert response.status_code == 202, response.content
        assert Job.objects.get(pk=response.json()["id"]).params == params


def test_a_body_over_the_size_limit_is_a_413_with_a_code(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    raw = json.dumps({"prompt": "x", "params": {"a": "y" * 2000}})
    response = api.post("/api/v1/jobs", raw, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert Job.objects.count() == 0


urls = st.one_of(values, st.sampled_from([
    "https://93.184.216.34/h", "http://[::1]/", "https://93.184.216.34/\x00", "ftp://x/",
    "https://93.184.216.34/" + "a" * 600, "https://93.184.216.34/\ud800"]))
_EVENTS = ["job.running", "job.dead", "job.queued", "", "\x00"]
query_values = st.one_of(text, numbers.map(str), st.sampled_from(["QUEUED", "1", "500", ""]))
# a bulk cancel, hold or release: a list of labels, or anything else
label_bodies = st.one_of(values, st.fixed_dictionaries({"label": st.one_of(
    st.lists(text, max_size=3), values)}))


def queries(*keys: str) -> st.SearchStrategy:
    """Up to three of `keys` (and one no endpoint knows), each with any value."""
    return st.dictionaries(st.sampled_from([*keys, "x"]), query_values, max_size=3)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries("state", "limit", "before", "label"))
def test_any_list_query_is_a_page_or_a_400(api, query):
    from urllib.parse import urlencode

    for path in ("/api/v1/jobs", "/api/v1/queue"):
        response = api.get(f"{path}?" + urlencode(query, errors="surrogatepass"))
        assert response.status_code in (200, 400), response.content[:300]
        assert "results" in response.json() or response.json()["error"]["code"]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(values, st.fixed_dictionaries({"url": urls}, optional={
    "events": st.one_of(st.lists(st.sampled_from(_EVENTS), max_size=9), values),
    "active": values})))
# a refusal that echoes a lone surrogate (an invalid event) once failed to render: a 500
@example(body={"url": "https://93.184.216.34/x", "events": ["\ud800"]})
def test_any_webhook_body_is_made_or_refused_with_a_code(api, body):
    from jobs.models import WebhookEndpoint

    before = WebhookEndpoint.objects.count()
    response = api.post("/api/v1/webhooks", json.dumps(body), content_type="application/json")
    assert response.status_code in (201, 400, 409), response.content[:300]
    made = WebhookEndpoint.objects.count() - before
    assert made == (response.status_code == 201)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries("stream", "rank", "tail"), body=label_bodies)
def test_any_log_question_bulk_cancel_or_erase_is_answered_or_refused_with_a_code(
        api, alice, query, body):
    from urllib.parse import urlencode

    from tests.support.factories import make_job

    job = make_job(alice)
    response = api.get(f"/api/v1/jobs/{job.pk}/log?" + urlencode(query, errors="surrogatepass"))
    assert response.status_code in (400, 404), response.content[:300]  # it never started
    assert response.json()["error"]["code"]
    response = api.post("/api/v1/jobs/cancel", json.dumps(body), content_type="application/json")
    assert response.status_code in (202, 400), response.content[:300]
    if response.status_code == 400:
        assert response.json()["error"]["code"]
        assert Job.objects.filter(state="CANCELLED").count() == 0
    erased = Job.objects.filter(erased_at__isnull=False).count()
    response = api.post("/api/v1/jobs/erase", json.dumps(body), content_type="application/json")
    assert response.status_code in (200, 400), response.content[:300]
    if response.status_code == 400:  # refused: nothing erased
        assert response.json()["error"]["code"]
        assert Job.objects.filter(erased_at__isnull=False).count() == erased


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(values, bodies), started=st.booleans())
def test_any_change_of_a_job_is_made_or_refused_with_a_code_and_a_refusal_changes_nothing(
        api, alice, body, started):
    from jobs.services.cancellation import job_cancel
    from tests.support.factories import make_job, make_node, start_placed

    job = make_job(alice)
    if started:  # its time limit alone may change then
        make_node(f"n{job.pk}", gpus=1)
        start_placed(job)
    version = Job.objects.get(pk=job.pk).version
    response = api.patch(f"/api/v1/jobs/{job.pk}", json.dumps(body),
                         content_type="application/json")
    assert response.status_code in (200, 400, 402, 403, 409), response.content[:300]
    if response.status_code != 200:
        assert response.json()["error"]["code"]
        assert Job.objects.get(pk=job.pk).version == version
    job_cancel(job=Job.objects.get(pk=job.pk))  # no round places it on the next one's node


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=queries("label", "project", "month"), body=label_bodies)
def test_any_summary_usage_or_bulk_hold_is_answered_or_refused_with_a_code(api, alice, query,
                                                                          body):
    from urllib.parse import urlencode

    from jobs.services.submission import JobSpec, job_submit

    job_submit(organization=alice, spec=JobSpec(prompt="x", labels={"batch": "b7"}))
    for path in ("/api/v1/jobs/summary", "/api/v1/credits/usage"):
        response = api.get(f"{path}?" + urlencode(query, errors="surrogatepass"))
        assert response.status_code in (200, 400, 404), (path, response.content[:300])
        assert response.status_code == 200 or response.json()["error"]["code"]
    for act in ("hold", "release"):
        held = set(Job.objects.filter(hold="client").values_list("pk", flat=True))
        response = api.post(f"/api/v1/jobs/{act}", json.dumps(body),
                            content_type="application/json")
        assert response.status_code in (200, 400), response.content[:300]
        if response.status_code == 400:  # refused: no job held or released
            assert response.json()["error"]["code"]
            assert set(Job.objects.filter(hold="client").values_list("pk", flat=True)) == held


def test_a_multipart_body_is_a_415_and_no_file_is_taken(api):
    """No call takes a file, and a file part would not be held to the size limit."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("big.bin", b"x" * 10_000)
    response = api.post("/api/v1/jobs", {"prompt": "x", "file": upload}, format="multipart")
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    assert Job.objects.count() == 0
