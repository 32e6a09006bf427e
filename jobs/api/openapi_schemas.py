"""The schemas of the client API's answers and notices (jobs/api/openapi.py assembles the
document): request bodies derived from the validating serializers, answers written out."""

from __future__ import annotations

from django.conf import settings

from credits.services.budgets import MAX_MONTHLY_LIMIT
from credits.services.owner_settings import MAX_THRESHOLD
from jobs.api.schema_fields import (
    ANY_OBJECT,
    BOOL,
    INT,
    NUMBER,
    STR,
    TIME,
    nullable,
    obj,
    request_schema,
)
from jobs.api.serializers import (
    JobBatchItemSerializer,
    JobSubmitSerializer,
    OrganizationSettingsSerializer,
    ProjectSerializer,
)
from jobs.models import ApiKey, Membership, WebhookDelivery
from jobs.models.webhook import EVENTS, JOB_EVENTS, ORGANIZATION_EVENTS
from jobs.services.projects import MAX_CAP, MAX_WEIGHT, MIN_WEIGHT, SETTINGS
from jobs.services.retention import MAX_ERASE_AFTER_HOURS
from jobs.services.team import SETTINGS as MEMBER_SETTINGS
from jobs.states import JobState
from jobs.transitions import AMENDABLE


def _job_submit() -> dict:
    schema = request_schema(JobSubmitSerializer())
    schema["properties"]["gpus"]["maximum"] = settings.GPUSCHED_MAX_GPUS_PER_JOB
    schema["properties"]["time_limit_s"]["maximum"] = settings.GPUSCHED_MAX_TIME_LIMIT_S
    return schema


def _batch_job() -> dict:
    """A job of a batch: a submission's body, and the earlier jobs of the batch it runs
    after."""
    schema = request_schema(JobBatchItemSerializer())
    schema["properties"].update(_job_submit()["properties"])
    return schema


def _job_change() -> dict:
    """The submission's fields that a waiting job may change, none required, no others."""
    submit = _job_submit()
    return {"type": "object", "additionalProperties": False, "required": [],
            "properties": {name: schema for name, schema in submit["properties"].items()
                           if name in AMENDABLE}}


def _project_create() -> dict:
    """A project's body, with the ranges the service holds it to."""
    schema = request_schema(ProjectSerializer())
    fields = schema["properties"]
    fields["name"]["pattern"] = "^[a-z0-9][a-z0-9_-]*$"
    fields["weight"].update(minimum=MIN_WEIGHT, maximum=MAX_WEIGHT)
    fields["running_gpu_cap"].update(minimum=0, maximum=MAX_CAP)
    fields["monthly_limit"].update(minimum=0, maximum=MAX_MONTHLY_LIMIT)
    return {**schema, "additionalProperties": False}


def _organization_change() -> dict:
    """What an organization's PATCH may send, none required, no others."""
    schema = request_schema(OrganizationSettingsSerializer())
    fields = schema["properties"]
    fields["monthly_limit"].update(minimum=0, maximum=MAX_MONTHLY_LIMIT)
    fields["low_credits_threshold"].update(minimum=0, maximum=MAX_THRESHOLD)
    fields["erase_after_hours"].update(minimum=1, maximum=MAX_ERASE_AFTER_HOURS)
    return {**schema, "additionalProperties": False}


def _member_change() -> dict:
    """The settings a member's PATCH may send, none required, no others (not a role)."""
    fields = _project_create()["properties"]
    return obj({name: fields[name] for name in MEMBER_SETTINGS}, optional=MEMBER_SETTINGS)


def _project_change() -> dict:
    """The settings a project's PATCH may send, none required, no others (not its name)."""
    fields = _project_create()["properties"]
    return obj({name: fields[name] for name in SETTINGS}, optional=SETTINGS)


PROJECT = obj({
    "name": STR, "weight": NUMBER,
    "running_gpu_cap": {**nullable(INT), "description": "GPUs its jobs may hold at once; "
                        "null: no cap of its own"},
    "running_gpus": {**INT, "description": "GPUs its jobs hold now"},
    "monthly_limit": {**nullable(INT), "description": "credits a calendar month its jobs may "
                      "commit; null: no budget"}})
MEMBER = obj({
    "username": STR, "role": {"type": "string", "enum": list(Membership.Role.values)},
    "weight": NUMBER,
    "running_gpu_cap": {**nullable(INT), "description": "GPUs the jobs they send may hold at "
                        "once; null: no cap of their own"},
    "running_gpus": {**INT, "description": "GPUs the jobs they sent hold now"},
    "monthly_limit": {**nullable(INT), "description": "credits a calendar month the jobs "
                      "they send may commit; null: no budget"}})
API_KEY = obj({
    "id": INT, "prefix": STR, "name": STR, "scope": {"enum": list(ApiKey.Scope.values)},
    "user": {**nullable(STR), "description": "the member its jobs are sent as"},
    "created_at": TIME,
    "last_used_at": {**nullable(TIME), "description": "to the minute; null: never"},
    "expires_at": nullable(TIME), "revoked_at": nullable(TIME),
    "live": {**BOOL, "description": "neither revoked nor expired: it authenticates"}})
STATE = {"type": "string", "enum": list(JobState.values)}
HOLD = {"type": ["string", "null"], "enum": ["client", "operator", None],
        "description": "who holds it HELD out of the queue until they release it (POST "
                       "/api/v1/jobs/{id}/release), or PREEMPTING: stopping at a checkpoint "
                       "to be held; an operator's hold is an operator's to release. Null: no "
                       "one."}
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
PENDING = nullable(obj({
    "code": STR, "reason": STR, "estimated_start": nullable(TIME), "what_if": STR,
    "relaxation": RELAXATION, "position": POSITION,
    "misses_start_deadline": {**BOOL, "description": "The estimated start is past the job's "
                              "start_by: unless it starts sooner it is cancelled then."}}))
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
PROGRESS = {**nullable(obj({
    "fraction": {**NUMBER, "description": "0 to 1, as its binary last said"},
    "estimated_end": {**nullable(TIME), "description": "where the pace of its run so far ends "
                      "it, never past its time limit; null before 5%, and for a try that "
                      "resumed part-way"}})),
    "description": "while its binary runs; null otherwise"}
STOPPING = {**nullable(obj({
    "for": {"type": "string", "enum": ["cancel", "preempt", "hold"]},
    "deadline": {**nullable(TIME), "description": "when its node kills the binary if it has "
                 "not stopped by then"}})),
    "description": "while its node stops it, asked by a cancel, a preemption (or an "
    "operator's requeue or a node's evacuation) or a hold; null otherwise"}
JOB = obj({
    "id": INT, "organization": STR, "project": STR,
    "state": STATE,
    "hold": HOLD,
    "version": INT, "prompt": STR,
    "params": ANY_OBJECT, "labels": LABELS, "gpus": INT, "min_gpus": nullable(INT),
    "gpu_types": {"type": "array", "items": STR},
    "min_gpu_memory_mb": INT, "region": STR, "time_limit_s": INT, "checkpointable": BOOL,
    "preemptible": BOOL, "urgency_s": INT,
    "after": {"type": "array", "items": INT, "description": "Jobs that must succeed before "
              "it queues: HELD until then, CANCELLED dependency_failed if one does not; with "
              "after_mode ended, only end, however they end."},
    "after_mode": {"type": "string", "enum": ["succeeded", "ended"]},
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
    "placement": PLACEMENT, "progress": PROGRESS, "stopping": STOPPING,
    "checkpoint": CHECKPOINT, "result": ANY_OBJECT, "output_url": nullable(STR),
    "error_code": STR, "error": STR,
    "erased_at": {**nullable(TIME), "description": "When its prompt, params, output, logs "
                  "and checkpoints were erased (POST /api/v1/jobs/{id}/erase); null until "
                  "then."}})
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
JOBS_SUMMARY = obj({
    "jobs": INT, "states": {"type": "object", "additionalProperties": INT,
                           "description": "jobs by state, the states with any"},
    "ended": INT, "gpus_held": {**INT, "description": "GPUs the live ones hold now"},
    "gpu_hours": {"type": "number", "description": "every try's GPUs × its run, one still "
                                                   "running until now"},
    "credits": obj({"held": INT, "spent": INT, "refunded": INT}),
    "first_submitted_at": nullable(TIME), "last_ended_at": nullable(TIME)})
ACCEPTED = obj({"id": INT, "state": STR, "url": STR, "backlog_s": nullable({
    "type": "integer", "description": "How long the work waiting at the job's tier or above "
    "would keep the whole fleet busy, as of the last round (what admission sheds by); not a "
    "start estimate, which the job's pending.estimated_start gives after the next round. "
    "Null while no round has published one."})})
ERROR = obj({"error": {
    "type": "object", "required": ["code", "message"],
    "description": "Refusals add their figures: retry_after_s (429), needed and available "
                   "(402 insufficient_credits), scope, monthly_limit and committed (402 "
                   "budget_exceeded), index (a batch's: the job refused, from 0).",
    "properties": {"code": STR, "message": STR, "fields": ANY_OBJECT, "retry_after_s": INT,
                   "needed": INT, "available": INT, "scope": STR, "monthly_limit": INT,
                   "committed": INT, "index": INT}}})
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
                                    "'HTTP 503', 'HTTP 302: redirects are not "
                                    "followed', 'unreachable: ...'; empty once "
                                    "delivered."},
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

PREVIEW = obj({
    "dry_run": {"type": "boolean", "enum": [True]},
    "state": {"type": "string", "enum": ["QUEUED", "HELD"]},
    "credits": obj({"hold": INT, "available_after": INT}), "backlog_s": nullable(INT)})
_LIMITED = ("running_gpus", "waiting_jobs", "requests_per_min", "backlog_s", "live_keys",
            "webhooks")
ORGANIZATION = obj({
    "slug": STR, "name": STR,
    "suspended": {**nullable(obj({"at": TIME, "reason": STR})),
                  "description": "set while an operator suspends the organization: no new "
                                 "job is accepted (403 organization_suspended) or started"},
    "tier": obj({"name": STR, "priority": INT, "start_slo_s": INT, "preemptible": BOOL}),
    "key": obj({"prefix": STR, "name": STR,
                "scope": {"type": "string", "enum": list(ApiKey.Scope.values)},
                "user": nullable(STR), "expires_at": nullable(TIME)}),
    "limits": {**obj({**{name: nullable(INT) for name in _LIMITED},
                      "gpus_per_job": INT, "max_retries": INT}),
               "description": "null: no limit. running_gpus: past it the organization's jobs "
                              "wait; waiting_jobs and backlog_s: past them a submission is "
                              "429 (queue_full, overloaded); requests_per_min: 429 "
                              "rate_limited; live_keys, webhooks: 409"},
    "dedicated_nodes": {"type": "array", "items": obj({
        "node": STR, "gpu_type": STR, "gpus": INT, "from": nullable(TIME),
        "until": nullable(TIME)}), "description": "nodes an operator dedicated to the "
        "organization: only its jobs start there, and they go there first; from: when a "
        "dedication ahead begins (null: begun), until: when it ends (null: when an operator "
        "ends it)"},
    "settings": {**obj({"monthly_limit": nullable(INT), "low_credits_threshold": INT,
                        "erase_after_hours": nullable(INT)}),
                 "description": "what the organization sets for itself (PATCH): its monthly "
                                "budget (null: none), the available credits below which "
                                "its webhooks are told credits.low (0: never), and the hours "
                                "after its end that each ended job's content is erased "
                                "(null: never)"},
    "usage": {**obj({name: nullable(NUMBER) if name == "backlog_s" else INT
                     for name in _LIMITED}),
              "description": "what the organization uses now of each limit of that name; "
                             "backlog_s: its tier's, as of the last scheduling round (null "
                             "when none is recent)"}})

NOTICE = obj({
    "event": {"type": "string", "enum": list(JOB_EVENTS)}, "delivery": INT,
    "job": obj({"id": INT, "state": STATE, "hold": HOLD, "labels": LABELS,
                 "error_code": STR, "result": ANY_OBJECT, "output_url": nullable(STR),
                 "finished_at": nullable(TIME), "retries": INT,
                 "retry_at": nullable(TIME), "credits": JOB_CREDITS})})
ORGANIZATION_NOTICE = obj({
    "event": {"enum": list(ORGANIZATION_EVENTS)}, "delivery": INT, "organization": STR,
    "reason": {**STR, "description": "the operator's, on a suspension; empty on a resume"}})
PING_NOTICE = obj({
    "event": {"enum": ["ping"]}, "delivery": INT, "organization": STR, "endpoint": INT,
    "sent_at": TIME})
CREDITS_NOTICE = obj({
    "event": {"enum": ["credits.low"]}, "delivery": INT, "organization": STR,
    "credits": obj({"available": INT, "threshold": INT})})
REFUND_NOTICE = obj({
    "event": {"enum": ["credits.refunded"]}, "delivery": INT, "organization": STR,
    "job": INT, "credits": obj({"refunded": INT}),
    "note": {**STR, "description": "the operator's, as they gave it; may be empty"}})


def component_schemas() -> dict:
    """The document's named schemas (components/schemas)."""
    return {"JobSubmit": _job_submit(), "JobChange": _job_change(), "Job": JOB,
            "BatchJob": _batch_job(),
            "JobDetail": JOB_DETAIL, "Accepted": ACCEPTED, "QueueLine": QUEUE_LINE,
            "JobsSummary": JOBS_SUMMARY,
            "Error": ERROR, "Webhook": WEBHOOK, "WebhookCreated": WEBHOOK_CREATED,
            "WebhookRotated": WEBHOOK_ROTATED, "Delivery": DELIVERY, "Credits": CREDITS,
            "Usage": USAGE, "Organization": ORGANIZATION, "Preview": PREVIEW,
            "Notice": NOTICE,
            "CreditsNotice": CREDITS_NOTICE, "RefundNotice": REFUND_NOTICE,
            "PingNotice": PING_NOTICE,
            "OrganizationNotice": ORGANIZATION_NOTICE, "Project": PROJECT,
            "ProjectCreate": _project_create(), "ProjectChange": _project_change(),
            "Member": MEMBER, "MemberChange": _member_change(), "ApiKey": API_KEY,
            "OrganizationChange": _organization_change()}
