"""The client API described as OpenAPI 3.1, served at /api/v1/openapi.json.

Request bodies are derived from the serializers that validate them, so they cannot drift;
answers are written out here, and tests/integration/test_openapi.py checks real answers of
every call against them (no key the document does not name, none it requires missing).
"""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from credits.api.views import TransferListQuery, UsageQuery
from jobs.api.paging import PageQuery
from jobs.api.schema_fields import (
    ANY_OBJECT,
    BOOL,
    INT,
    NUMBER,
    STR,
    TIME,
    field_schema,
    nullable,
    obj,
    request_schema,
)
from jobs.api.serializers import (
    DeliveryQuery,
    JobListQuery,
    JobSubmitSerializer,
    LabelledQuery,
    LineQuery,
    LogQuery,
    WebhookEndpointSerializer,
)
from jobs.models import WebhookDelivery
from jobs.models.webhook import EVENTS, JOB_EVENTS
from jobs.services.cancellation import CANCEL_BATCH
from jobs.states import JobState
from jobs.transitions import AMENDABLE


def _job_submit() -> dict:
    schema = request_schema(JobSubmitSerializer())
    schema["properties"]["gpus"]["maximum"] = settings.GPUSCHED_MAX_GPUS_PER_JOB
    schema["properties"]["time_limit_s"]["maximum"] = settings.GPUSCHED_MAX_TIME_LIMIT_S
    return schema


def _job_change() -> dict:
    """The submission's fields that a waiting job may change, none required, no others."""
    submit = _job_submit()
    return {"type": "object", "additionalProperties": False, "required": [],
            "properties": {name: schema for name, schema in submit["properties"].items()
                           if name in AMENDABLE}}


STATE = {"type": "string", "enum": list(JobState.values)}
POSITION = nullable({**obj({"place": INT, "of": INT, "ahead_s": nullable(INT),
                              "as_of": TIME}), "description":
    "The job's place in line (1: first) among the `of` jobs waiting when the scheduler last "
    "drew the line, at `as_of` (every GPUSCHED_POSITIONS_SECONDS): the order its ranking "
    "would start them in, tiers and fair share included. `ahead_s`: how long the jobs ahead "
    "of it (their run times: estimated, else learned, else time limits) would keep the "
    "whole fleet busy; not a start estimate, as jobs that arrive later may rank ahead; null "
    "while no GPU is schedulable. "
    "Null until a line includes the job."})
RELAXATION = nullable({**obj({"gpu_types": {"type": "array", "items": STR}, "gpus": INT},
                               optional=("gpu_types", "gpus")), "description":
    "The change that takes the what-if: send it as the body of PATCH /api/v1/jobs/{id}. "
    "Null when there is no what-if."})
PENDING = nullable(obj({"code": STR, "reason": STR, "estimated_start": nullable(TIME),
                          "what_if": STR, "relaxation": RELAXATION, "position": POSITION}))
PLACEMENT = nullable({"type": "array", "items": obj({"rank": INT, "node": STR,
                                                     "gpus": {"type": "array", "items": INT}}),
                      "description":
    "Where the job holds GPUs, while it does (SCHEDULED, RUNNING, PREEMPTING): one entry a "
    "node, rank 0 first; a gang larger than a node spans nodes of one island. Null otherwise."})
CHECKPOINT = nullable({
    **obj({"attempt": INT, "nodes": INT, "step": nullable(INT), "taken_at": nullable(TIME)}),
    "description":
    "What a retry of the job would resume from now, on any nodes: the stored checkpoint of "
    "`attempt`, one copy for each of its `nodes` (a gang's all of one step). `step`: the "
    "binary's, if it announced one; `taken_at`: when it was copied while the job ran, null "
    "for the one written as it stopped. Null while there is none, and once the job ended."})
LABELS = {"type": "object", "additionalProperties": STR,
          "description": "The client's names for the job, as it submitted them."}
JOB = obj({
    "id": INT, "organization": STR, "project": STR,
    "state": STATE, "version": INT, "prompt": STR,
    "params": ANY_OBJECT, "labels": LABELS, "gpus": INT, "min_gpus": nullable(INT),
    "gpu_types": {"type": "array", "items": STR},
    "min_gpu_memory_mb": INT, "region": STR, "time_limit_s": INT, "checkpointable": BOOL,
    "preemptible": BOOL, "urgency_s": INT,
    "after": {"type": "array", "items": INT, "description": "Jobs that must succeed before "
              "it queues: HELD until then, CANCELLED dependency_failed if one does not."},
    "created_at": TIME, "started_at": nullable(TIME),
    "finished_at": nullable(TIME), "preemptions": INT,
    "start_by": {**nullable(TIME), "description": "Cancelled (start_deadline_passed) if it "
                 "has not started by then: its start_within_s after submission."},
    "retries": {**INT, "description": "Retries so far, after lost or failed attempts."},
    "max_retries": {**INT, "description": "The retries it may have; then it is "
                    "dead-lettered."},
    "retry_at": {**nullable(TIME), "description": "While RETRY_WAIT: when it waits in the "
                 "queue again."},
    "pending": PENDING,
    "placement": PLACEMENT, "checkpoint": CHECKPOINT,
    "result": ANY_OBJECT, "output_url": nullable(STR), "error_code": STR, "error": STR})
JOB_CREDITS = obj({"held": INT, "spent": INT, "refunded": INT})
JOB_DETAIL = {**JOB, "properties": {**JOB["properties"], "credits": JOB_CREDITS},
              "required": [*JOB["required"], "credits"]}
JOB_EVENT = obj({
    "id": INT, "at": TIME, "from_state": {**STATE, "enum": ["", *JobState.values]},
    "to_state": STATE, "version": INT, "reason": STR, "attempt": nullable(INT),
    "data": {**ANY_OBJECT, "description": "A change of the request: {changed: {field: "
             "[old, new]}}; a move to RETRY_WAIT after a failed attempt: {error_code, "
             "exit_code} (and changed, when an OOM raised min_gpu_memory_mb); otherwise "
             "what the move recorded."}})
ATTEMPT = obj({
    "id": INT, "created_at": TIME, "started_at": nullable(TIME), "ended_at": nullable(TIME),
    "nodes": {"type": "array", "items": obj({"rank": INT, "node": STR, "gpus": {
        "type": "array", "items": INT}})},
    "progress": NUMBER, "outcome": {**STR, "description": "Empty while it runs; else "
                                    "SUCCEEDED, FAILED, OOM, TIMED_OUT, PREEMPTED, CANCELLED "
                                    "or LOST."},
    "exit_code": nullable(INT), "stderr_tail": STR,
    "log_url": {**nullable(STR), "description": "Where what its binary printed is read "
                "while it is kept (null if nothing was, or once it expired)."}})
QUEUE_LINE = obj({
    "of": nullable(INT), "as_of": nullable(TIME), "waiting": INT, "in_line": INT,
    "results": {"type": "array", "items": obj({
        "id": INT, "gpus": INT, "place": INT, "ahead_s": nullable(INT)})}})
ACCEPTED = obj({"id": INT, "state": STR, "url": STR, "backlog_s": nullable({
    "type": "integer", "description": "How long the work waiting at the job's tier or above "
    "would keep the whole fleet busy, as of the last round (what admission sheds by); not a "
    "start estimate, which the job's pending.estimated_start gives after the next round. "
    "Null while no round has published one."})})
ERROR = obj({"error": {
    "type": "object", "required": ["code", "message"],
    "description": "Refusals add their figures: retry_after_s (429), needed and available "
                   "(402 insufficient_credits), scope, monthly_limit and committed (402 "
                   "budget_exceeded).",
    "properties": {"code": STR, "message": STR, "fields": ANY_OBJECT, "retry_after_s": INT,
                   "needed": INT, "available": INT, "scope": STR, "monthly_limit": INT,
                   "committed": INT}}})
WEBHOOK = obj({"id": INT, "url": STR, "events": {"type": "array", "items": {
    "type": "string", "enum": list(EVENTS)}}, "active": BOOL, "created_at": TIME})
WEBHOOK_CREATED = {**WEBHOOK, "properties": {**WEBHOOK["properties"], "secret": STR},
                   "required": [*WEBHOOK["required"], "secret"]}
WEBHOOK_ROTATED = {**WEBHOOK_CREATED, "properties": {
    **WEBHOOK_CREATED["properties"], "previous_secret_until": TIME},
    "required": [*WEBHOOK_CREATED["required"], "previous_secret_until"]}
DELIVERY = obj({
    "id": {**INT, "description": "The `delivery` of the notice: the same on every send."},
    "event": STR, "job": nullable(INT),
    "status": {"type": "string", "enum": list(WebhookDelivery.Status.values)},
    "attempts": INT, "last_error": {**STR, "description": "Why the last send failed: "
                                    "'HTTP 503', 'unreachable: ...'; empty once delivered."},
    "created_at": TIME, "next_attempt_at": TIME, "delivered_at": nullable(TIME)})
TRANSFER = obj({
    "id": INT, "kind": STR, "amount": INT, "direction": {"enum": ["in", "out"]},
    "bucket": STR, "job": nullable(INT), "attempt": nullable(INT), "memo": STR,
    "created_at": TIME})
CREDITS = obj({
    "available": INT, "held": INT,
    "buckets": {"type": "array", "items": obj({
        "bucket": {"type": "string", "enum": ["paid", "promo"]}, "available": INT,
        "held": INT, "expires_at": nullable(TIME)})},
    "budgets": {"type": "array", "items": obj({
        "scope": STR, "monthly_limit": INT, "committed": INT, "month": STR})},
    "transfers": {"type": "array", "items": TRANSFER}})

_USED = {"spent": INT, "refunded": INT, "gpu_hours": NUMBER}
USAGE = obj({"month": STR, **_USED,
              "projects": {"type": "array", "items": obj({"project": STR, **_USED})},
              "gpu_types": {"type": "array", "items": obj({
                  "gpu_type": STR, "spent": INT, "gpu_hours": NUMBER})}})


NOTICE = obj({
    "event": {"type": "string", "enum": list(JOB_EVENTS)}, "delivery": INT,
    "job": obj({"id": INT, "state": STATE, "labels": LABELS,
                 "error_code": STR, "result": ANY_OBJECT, "output_url": nullable(STR),
                 "finished_at": nullable(TIME), "retries": INT,
                 "retry_at": nullable(TIME), "credits": JOB_CREDITS})})
CREDITS_NOTICE = obj({
    "event": {"enum": ["credits.low"]}, "delivery": INT, "organization": STR,
    "credits": obj({"available": INT, "threshold": INT})})


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _answer(description: str, schema: str | None = None) -> dict:
    if schema is None:
        return {"description": description}
    return {"description": description,
            "content": {"application/json": {"schema": _ref(schema)}}}


def _errors(*statuses: int) -> dict:
    meaning = {400: "invalid request", 401: "no or a bad API key", 402: "not enough credits, "
               "or past a budget", 404: "no such object in this organization", 409: "conflict",
               410: "gone: the output was deleted past its retention",
               413: "request too large", 429: "refused for now: see Retry-After"}
    return {str(s): _answer(meaning[s], "Error") for s in (*statuses, 401)}


def _query(serializer: serializers.Serializer) -> list[dict]:
    return [{"name": name, "in": "query", "required": field.required,
             "schema": field_schema(field)} for name, field in serializer.fields.items()]


JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": INT}
HOOK_ID = {"name": "hook_id", "in": "path", "required": True, "schema": INT}
DELIVERY_ID = {"name": "delivery_id", "in": "path", "required": True, "schema": INT}
ATTEMPT_ID = {"name": "attempt_id", "in": "path", "required": True, "schema": INT}
LOG_TEXT = {
    "description": "what the try's binary printed to the stream, its last "
                   "GPUSCHED_LOG_MAX_BYTES at most (empty if nothing was kept); X-Attempt-Id "
                   "names the try, X-Log-Final says whether it has ended",
    "headers": {"X-Attempt-Id": {"schema": INT}, "X-Log-Final": {"schema": {
        "type": "string", "enum": ["true", "false"]}}},
    "content": {"text/plain": {"schema": STR}}}
IDEMPOTENCY_KEY = {"name": "Idempotency-Key", "in": "header", "required": False,
                   "schema": {"type": "string", "maxLength": 255},
                   "description": "A retry with the same key gets the same job."}


def _paths() -> dict:
    return {
        "/api/v1/jobs": {
            "post": {"operationId": "submitJob", "parameters": [IDEMPOTENCY_KEY],
                     "requestBody": {"required": True, "content": {
                         "application/json": {"schema": _ref("JobSubmit")}}},
                     "responses": {"202": _answer("accepted: the job waits in the queue",
                                                  "Accepted"),
                                   **_errors(400, 402, 409, 413, 429)}},
            "get": {"operationId": "listJobs", "parameters": _query(JobListQuery()),
                    "responses": {
                "200": {"description": "the organization's jobs, newest first, a page at a "
                                       "time; `next` is the following page's URL", "content": {
                    "application/json": {"schema": obj(
                        {"results": {"type": "array", "items": _ref("Job")},
                         "next": nullable(STR)})}}},
                **_errors(400, 429)}}},
        "/api/v1/queue": {"get": {
            "operationId": "getQueueLine", "parameters": _query(LineQuery()),
            "responses": {"200": _answer(
                "the organization's waiting jobs in the order of the scheduler's last line "
                "(pending.position), first in line first: `of` jobs were in that line, drawn "
                "`as_of`; `waiting` of the organization's jobs wait, `in_line` of them were "
                "in it (those submitted since have no place yet)", "QueueLine"),
                **_errors(400, 429)}}},
        "/api/v1/jobs/{job_id}": {
            "get": {"operationId": "getJob", "parameters": [JOB_ID],
                    "responses": {"200": _answer("the job", "JobDetail"),
                                  **_errors(404, 429)}},
            "patch": {"operationId": "changeJob", "parameters": [JOB_ID],
                      "description": "Change what a waiting job that never started asks for "
                                     "(e.g. the relaxation its pending.what_if names); it keeps "
                                     "its wait and its credits are held anew. Only the fields "
                                     "sent change.",
                      "requestBody": {"required": True, "content": {
                          "application/json": {"schema": _ref("JobChange")}}},
                      "responses": {"200": _answer("the job as changed", "JobDetail"),
                                    **_errors(400, 402, 404, 409, 429)}}},
        "/api/v1/jobs/{job_id}/events": {"get": {
            "operationId": "listJobEvents", "parameters": [JOB_ID, *_query(PageQuery())],
            "responses": {"200": {"description": "the job's history, newest first: every "
                                                 "move of its state and change of its request",
                                  "content": {"application/json": {"schema": obj(
                                      {"results": {"type": "array", "items": JOB_EVENT},
                                       "next": nullable(STR)})}}},
                          **_errors(400, 404, 429)}}},
        "/api/v1/jobs/{job_id}/attempts": {"get": {
            "operationId": "listJobAttempts", "parameters": [JOB_ID],
            "responses": {"200": {"description": "the job's tries, newest first: where each "
                                                 "ran, how it ended, the end of its stderr",
                                  "content": {"application/json": {"schema": obj(
                                      {"results": {"type": "array", "items": ATTEMPT}})}}},
                          **_errors(404, 429)}}},
        "/api/v1/jobs/{job_id}/log": {"get": {
            "operationId": "getJobLog", "parameters": [JOB_ID, *_query(LogQuery())],
            "responses": {"200": LOG_TEXT, **_errors(400, 404, 410, 429)}}},
        "/api/v1/jobs/{job_id}/attempts/{attempt_id}/log": {"get": {
            "operationId": "getAttemptLog", "parameters": [JOB_ID, ATTEMPT_ID,
                                                           *_query(LogQuery())],
            "responses": {"200": LOG_TEXT, **_errors(400, 404, 410, 429)}}},
        "/api/v1/jobs/{job_id}/output": {"get": {
            "operationId": "getJobOutput", "parameters": [JOB_ID],
            "responses": {"200": {"description": "the output file, as an attachment",
                                  "content": {"application/octet-stream": {
                                      "schema": {"type": "string",
                                                 "contentMediaType": "application/octet-stream"}}}},
                          **_errors(404, 410, 429)}}},
        "/api/v1/jobs/cancel": {"post": {
            "operationId": "cancelJobsByLabel",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": request_schema(LabelledQuery())}}},
            "responses": {"202": {"description": "the jobs cancelled now, those asked to stop "
                                                 "on their nodes, and how many more match "
                                                 f"(at most {CANCEL_BATCH} a request)",
                                  "content": {"application/json": {"schema": obj({
                                      "cancelled": {"type": "array", "items": INT},
                                      "stopping": {"type": "array", "items": INT},
                                      "left": INT})}}},
                          **_errors(400, 429)}}},
        "/api/v1/jobs/{job_id}/cancel": {"post": {
            "operationId": "cancelJob", "parameters": [JOB_ID],
            "responses": {"202": _answer("cancelled, or stopping on its node", "Job"),
                          **_errors(404, 409, 429)}}},
        "/api/v1/projects": {"get": {
            "operationId": "listProjects",
            "responses": {"200": {"description": "the organization's projects: the names a "
                                                 "job's `project` may take", "content": {
                "application/json": {"schema": obj({"results": {"type": "array", "items": obj({
                    "name": STR, "weight": NUMBER,
                    "monthly_limit": {**nullable(INT), "description": "credits a calendar "
                                      "month its jobs may commit; null: no budget"}})}})}}},
                **_errors(429)}}},
        "/api/v1/events": {"get": {
            "operationId": "listOrganizationEvents", "parameters": _query(PageQuery()),
            "responses": {"200": {"description": "what the organization's people changed in "
                                                 "it, and who, newest first, a page at a "
                                                 "time", "content": {
                "application/json": {"schema": obj({
                    "results": {"type": "array", "items": obj({
                        "id": INT, "at": TIME,
                        "by": {**STR, "description": "a member's username, or 'key gs_…' "
                               "for a client's key"},
                        "action": {**STR, "description": "e.g. api_key.made, budget.set, "
                                   "webhook.removed, member.changed"},
                        "detail": ANY_OBJECT})},
                    "next": nullable(STR)})}}},
                **_errors(400, 429)}}},
        "/api/v1/webhooks": {
            "get": {"operationId": "listWebhooks", "responses": {
                "200": {"description": "the organization's endpoints", "content": {
                    "application/json": {"schema": obj(
                        {"results": {"type": "array", "items": _ref("Webhook")}})}}},
                **_errors(429)}},
            "post": {"operationId": "createWebhook",
                     "requestBody": {"required": True, "content": {"application/json": {
                         "schema": request_schema(WebhookEndpointSerializer())}}},
                     "responses": {"201": _answer("created; the secret is shown this once",
                                                  "WebhookCreated"),
                                   **_errors(400, 409, 429)}}},
        "/api/v1/webhooks/{hook_id}": {"delete": {
            "operationId": "deleteWebhook", "parameters": [HOOK_ID],
            "responses": {"204": _answer("removed"), **_errors(404, 429)}}},
        "/api/v1/webhooks/{hook_id}/rotate-secret": {"post": {
            "operationId": "rotateWebhookSecret", "parameters": [HOOK_ID],
            "description": "A new secret, shown this once. For a day the one before signs "
                           "each notice too (a second sha256= in X-Gpusched-Signature), so "
                           "the receiver moves to the new one without refusing any.",
            "responses": {"200": _answer("rotated: the new secret", "WebhookRotated"),
                          **_errors(404, 429)}}},
        "/api/v1/webhooks/{hook_id}/deliveries": {"get": {
            "operationId": "listWebhookDeliveries",
            "parameters": [HOOK_ID, *_query(DeliveryQuery())],
            "responses": {"200": {"description": "what was sent to the endpoint, newest "
                                                 "first, a page at a time", "content": {
                "application/json": {"schema": obj(
                    {"results": {"type": "array", "items": _ref("Delivery")},
                     "next": nullable(STR)})}}},
                          **_errors(400, 404, 429)}}},
        "/api/v1/webhooks/{hook_id}/deliveries/{delivery_id}/redeliver": {"post": {
            "operationId": "redeliverWebhook", "parameters": [HOOK_ID, DELIVERY_ID],
            "description": "Send a delivery that failed, or arrived, again now, with a fresh "
                           "round of attempts; one still pending keeps its schedule.",
            "responses": {"202": _answer("sent again (pending)", "Delivery"),
                          **_errors(404, 429)}}},
        "/api/v1/credits/transfers": {"get": {
            "operationId": "listCreditTransfers", "parameters": _query(TransferListQuery()),
            "responses": {"200": {"description": "the organization's transfers, newest "
                                                 "first, a page at a time", "content": {
                "application/json": {"schema": obj(
                    {"results": {"type": "array", "items": TRANSFER},
                     "next": nullable(STR)})}}},
                          **_errors(400, 429)}}},
        "/api/v1/credits/usage": {"get": {
            "operationId": "getCreditUsage", "parameters": _query(UsageQuery()),
            "responses": {"200": _answer("one month's credits spent and refunded and "
                                         "GPU-hours run, in all, by project and GPU type",
                                         "Usage"),
                          **_errors(400, 429)}}},
        "/api/v1/credits": {"get": {
            "operationId": "getCredits",
            "responses": {"200": _answer("the organization's credits", "Credits"),
                          **_errors(429)}}},
    }


def _notice(summary: str, schema: str) -> dict:
    return {"post": {
        "summary": summary,
        "description": "Headers X-Gpusched-Event, X-Gpusched-Timestamp and "
                       "X-Gpusched-Signature: sha256= HMAC-SHA256 of '<timestamp>.<body>' under "
                       "the endpoint's secret (for a day after a rotation, a second one "
                       "under the secret before, comma separated: accept either). At least "
                       "once: deduplicate by `delivery`.",
        "requestBody": {"content": {"application/json": {"schema": _ref(schema)}}},
        "responses": {"200": {"description": "any 2xx: delivered"}}}}


def openapi_document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "gpusched", "version": "1",
                 "description": "Submit GPU jobs, follow them, cancel them; webhooks and "
                                "credits. Errors are {error: {code, message, ...}}."},
        "security": [{"apiKey": []}],
        "paths": _paths(),
        "webhooks": {
            "jobMoved": _notice("A job moved into one of the endpoint's events", "Notice"),
            "creditsLow": _notice("The organization's available credits fell below its "
                                  "low_credits_threshold (once per fall)", "CreditsNotice")},
        "components": {
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer",
                                           "description": "an organization's API key, gs_…"}},
            "schemas": {"JobSubmit": _job_submit(), "JobChange": _job_change(), "Job": JOB,
                        "JobDetail": JOB_DETAIL, "Accepted": ACCEPTED, "QueueLine": QUEUE_LINE,
                        "Error": ERROR, "Webhook": WEBHOOK,
                        "WebhookCreated": WEBHOOK_CREATED, "Delivery": DELIVERY,
                        "WebhookRotated": WEBHOOK_ROTATED,
                        "Credits": CREDITS,
                        "Usage": USAGE, "Notice": NOTICE, "CreditsNotice": CREDITS_NOTICE}},
    }
