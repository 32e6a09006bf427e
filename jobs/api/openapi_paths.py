"""The calls of the client API as OpenAPI paths (jobs/api/openapi.py assembles the document):
request bodies derived from the serializers that validate them, answers named from
jobs/api/openapi_schemas.py."""

from __future__ import annotations

from rest_framework import serializers

from jobs.api.openapi_schemas import ATTEMPT, JOB_EVENT
from jobs.api.paging import PageQuery
from jobs.api.queries import (
    JobListQuery,
    LabelledQuery,
    LineQuery,
    LogQuery,
    SummaryQuery,
)
from jobs.api.schema_fields import (
    INT,
    STR,
    field_schema,
    nullable,
    obj,
    request_schema,
)
from jobs.services.batches import MAX_BATCH
from jobs.services.cancellation import CANCEL_BATCH
from jobs.services.erasure import ERASE_BATCH


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def answer(description: str, schema: str | None = None) -> dict:
    if schema is None:
        return {"description": description}
    return {"description": description,
            "content": {"application/json": {"schema": ref(schema)}}}


def errors(*statuses: int) -> dict:
    meaning = {400: "invalid request", 401: "no or a bad API key", 402: "not enough credits, "
               "or past a budget", 404: "no such object in this organization", 409: "conflict",
               410: "gone: deleted past its retention (output_expired, log_expired), the "
                    "job was erased (job_erased), or the output lost (output_missing)",
               413: "request too large", 429: "refused for now: see Retry-After",
               503: "the database (database_unavailable), or the storage an output or log "
                    "is kept in (storage_unavailable), did not answer; ask again after "
                    "Retry-After"}
    return {str(s): answer(meaning[s], "Error") for s in (*statuses, 401, 503)}


def query_params(serializer: serializers.Serializer) -> list[dict]:
    return [{"name": name, "in": "query", "required": field.required,
             "schema": field_schema(field)} for name, field in serializer.fields.items()]


JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": INT}
ATTEMPT_ID = {"name": "attempt_id", "in": "path", "required": True, "schema": INT}
LOG_TEXT = {
    "description": "what the try's binary printed to the stream, its last "
                   "GPUSCHED_LOG_MAX_BYTES at most (empty if nothing was kept); X-Attempt-Id "
                   "names the try, X-Log-Final says whether it has ended",
    "headers": {"X-Attempt-Id": {"schema": INT}, "X-Log-Final": {"schema": {
        "type": "string", "enum": ["true", "false"]}}},
    "content": {"text/plain": {"schema": STR}}}
FILE = {"type": "string", "contentMediaType": "application/octet-stream"}
BYTE_RANGE = [
    {"name": "Range", "in": "header", "required": False, "schema": STR,
     "description": "bytes=FIRST-LAST, FIRST- or -LAST_N: one range, answered 206 (several, "
                    "or one that cannot be read: the whole file, 200)"},
    {"name": "If-Range", "in": "header", "required": False, "schema": STR,
     "description": "the ETag of the file a resumed download began: the range only while "
                    "the file is still that one, else the whole"}]
DRY_RUN = {"name": "dry_run", "in": "query", "required": False,
           "schema": {"type": "string", "enum": ["true", "false", "1", "0"]},
           "description": "true: answer what the submission would do now (200, or the "
                          "refusal it would get) and keep nothing."}
IDEMPOTENCY_KEY = {"name": "Idempotency-Key", "in": "header", "required": False,
                   "schema": {"type": "string", "maxLength": 255},
                   "description": "A retry with the same key gets the same job."}


def _labelled_batch(operation: str, done: str, description: str, batch: int = CANCEL_BATCH,
                    **more: dict) -> dict:
    """A call on the organization's jobs that carry each label, a batch at a time."""
    return {"operationId": operation,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": request_schema(LabelledQuery())}}},
            "responses": {"200": {"description": f"{description} (at most {batch} a "
                                                 f"request)", "content": {"application/json": {
                "schema": obj({done: {"type": "array", "items": INT}, "left": INT, **more})}}},
                **errors(400, 429)}}


def job_paths() -> dict:
    return {
        "/api/v1/jobs": {
            "post": {"operationId": "submitJob", "parameters": [IDEMPOTENCY_KEY, DRY_RUN],
                     "requestBody": {"required": True, "content": {
                         "application/json": {"schema": ref("JobSubmit")}}},
                     "responses": {"202": answer("accepted: the job waits in the queue",
                                                  "Accepted"),
                                   "200": answer("dry_run: what the submission would do "
                                                  "now; nothing was kept", "Preview"),
                                   "403": answer("insufficient_scope: the key's scope is "
                                                  "narrower than jobs; or "
                                                  "organization_suspended", "Error"),
                                   **errors(400, 402, 409, 413, 429)}},
            "get": {"operationId": "listJobs", "parameters": query_params(JobListQuery()),
                    "responses": {
                "200": {"description": "the organization's jobs, newest first, a page at a "
                                       "time; `next` is the following page's URL", "content": {
                    "application/json": {"schema": obj(
                        {"results": {"type": "array", "items": ref("Job")},
                         "next": nullable(STR)})}}},
                **errors(400, 429)}}},
        "/api/v1/jobs/batch": {"post": {
            "operationId": "submitJobs", "parameters": [IDEMPOTENCY_KEY],
            "description": "Submit 1 to 100 jobs at once, in order, each as POST /api/v1/jobs "
                           "would, all or none: the first refusal keeps no job of the batch "
                           "and names the one refused (`index`). The Idempotency-Key makes "
                           "one for each job (key/0, key/1, ...).",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": obj({"jobs": {"type": "array", "items": ref("BatchJob"),
                                        "minItems": 1, "maxItems": MAX_BATCH}})}}},
            "responses": {"202": {"description": "accepted: the jobs wait in the queue, in "
                                                 "the order sent", "content": {
                "application/json": {"schema": obj({
                    "jobs": {"type": "array", "items": obj({"id": INT, "state": STR,
                                                            "url": STR})},
                    "backlog_s": nullable(INT)})}}},
                          "403": answer("insufficient_scope, or organization_suspended",
                                        "Error"),
                          **errors(400, 402, 409, 413, 429)}}},
        "/api/v1/jobs/summary": {"get": {
            "operationId": "summarizeJobs", "parameters": query_params(SummaryQuery()),
            "responses": {"200": answer(
                "how many of the organization's jobs (with each label, of the project) are in "
                "each state, the GPUs they hold, the GPU-hours they ran and their credits: a "
                "batch's progress, an experiment's cost", "JobsSummary"),
                **errors(400, 429)}}},
        "/api/v1/queue": {"get": {
            "operationId": "getQueueLine", "parameters": query_params(LineQuery()),
            "responses": {"200": answer(
                "the organization's waiting jobs in the order of the scheduler's last line "
                "(pending.position), first in line first: `of` jobs were in that line, drawn "
                "`as_of`; `waiting` of the organization's jobs wait, `in_line` of them were "
                "in it (those submitted since have no place yet)", "QueueLine"),
                **errors(400, 429)}}},
        "/api/v1/jobs/{job_id}": {
            "get": {"operationId": "getJob", "parameters": [JOB_ID],
                    "responses": {"200": answer("the job", "JobDetail"),
                                  **errors(404, 429)}},
            "patch": {"operationId": "changeJob", "parameters": [JOB_ID],
                      "description": "Change what a waiting job that never started asks for "
                                     "(e.g. the relaxation its pending.what_if names); it keeps "
                                     "its wait and its credits are held anew. Only the fields "
                                     "sent change. `time_limit_s` alone changes for a job "
                                     "placed or run too, until it ends: shorter only (403 "
                                     "time_limit_extension_not_allowed: an operator lengthens "
                                     "it), not below what its running try has run (400 "
                                     "time_limit_passed); its nodes stop it at the new limit.",
                      "requestBody": {"required": True, "content": {
                          "application/json": {"schema": ref("JobChange")}}},
                      "responses": {"200": answer("the job as changed", "JobDetail"),
                                    "403": answer("time_limit_extension_not_allowed, or "
                                                  "insufficient_scope", "Error"),
                                    **errors(400, 402, 404, 409, 429)}}},
        "/api/v1/jobs/{job_id}/events": {"get": {
            "operationId": "listJobEvents", "parameters": [JOB_ID, *query_params(PageQuery())],
            "responses": {"200": {"description": "the job's history, newest first: every "
                                                 "move of its state and change of its request",
                                  "content": {"application/json": {"schema": obj(
                                      {"results": {"type": "array", "items": JOB_EVENT},
                                       "next": nullable(STR)})}}},
                          **errors(400, 404, 429)}}},
        "/api/v1/jobs/{job_id}/attempts": {"get": {
            "operationId": "listJobAttempts", "parameters": [JOB_ID],
            "responses": {"200": {"description": "the job's tries, newest first: where each "
                                                 "ran, how it ended, the end of its stderr",
                                  "content": {"application/json": {"schema": obj(
                                      {"results": {"type": "array", "items": ATTEMPT}})}}},
                          **errors(404, 429)}}},
        "/api/v1/jobs/{job_id}/log": {"get": {
            "operationId": "getJobLog", "parameters": [JOB_ID, *query_params(LogQuery())],
            "responses": {"200": LOG_TEXT, **errors(400, 404, 410, 429)}}},
        "/api/v1/jobs/{job_id}/attempts/{attempt_id}/log": {"get": {
            "operationId": "getAttemptLog", "parameters": [JOB_ID, ATTEMPT_ID,
                                                           *query_params(LogQuery())],
            "responses": {"200": LOG_TEXT, **errors(400, 404, 410, 429)}}},
        "/api/v1/jobs/{job_id}/output": {"get": {
            "operationId": "getJobOutput", "parameters": [JOB_ID, *BYTE_RANGE],
            "responses": {"200": {"description": "the output file, as an attachment",
                                  "content": {"application/octet-stream": {"schema": FILE}}},
                          "206": {"description": "the one range of it asked (Content-Range)",
                                  "content": {"application/octet-stream": {"schema": FILE}}},
                          "416": answer("range_not_satisfiable: it starts past the end",
                                        "Error"),
                          **errors(404, 410, 429)}}},
        "/api/v1/jobs/cancel": {"post": {
            "operationId": "cancelJobsByLabel",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": request_schema(LabelledQuery())}}},
            "responses": {"202": {"description": "the jobs cancelled now, those asked to stop "
                                                 "on their nodes (or still stopping), and how "
                                                 "many more match that were not asked yet "
                                                 f"(at most {CANCEL_BATCH} a request)",
                                  "content": {"application/json": {"schema": obj({
                                      "cancelled": {"type": "array", "items": INT},
                                      "stopping": {"type": "array", "items": INT},
                                      "left": INT})}}},
                          **errors(400, 429)}}},
        "/api/v1/jobs/hold": {"post": _labelled_batch(
            "holdJobsByLabel", "held", "the jobs held now (those held already are left out), "
            "those running that stop at a checkpoint to be held (`stopping`; running jobs "
            "that would start over are left to run), and how many more match",
            stopping={"type": "array", "items": INT})},
        "/api/v1/jobs/release": {"post": _labelled_batch(
            "releaseJobsByLabel", "released", "the jobs whose client's hold was released now "
            "(an operator's holds are left), and how many more match; `refused`: the release "
            "the credits or a budget no longer covered (its job, and those after it, still "
            "held), which stopped the batch", refused={
                "type": ["object", "null"], "required": ["code", "message"],
                "properties": {"code": STR, "message": STR},
                "description": "with the figures of its refusal (`needed`, `available`, ...)"})},
        "/api/v1/jobs/erase": {"post": _labelled_batch(
            "eraseJobsByLabel", "erased", "the ended jobs erased now, as each one's own erase "
            "would (a user's jobs, by the label their client gave them), how many more ended "
            "ones match (`left`: ask again), and how many that match have not ended "
            "(`not_ended`: cancel them, or wait, then ask again)", batch=ERASE_BATCH,
            not_ended=INT)},
        "/api/v1/jobs/{job_id}/erase": {"post": {
            "operationId": "eraseJob", "parameters": [JOB_ID],
            "description": "Erase an ended job's content at once: its prompt, params, output, "
                           "every try's logs and stderr, its error text and its stored "
                           "checkpoints; its state, labels, history and credits stay, so "
                           "usage and statements still add up. Irreversible; erasing it again "
                           "changes nothing. 409 job_not_finished for a job that has not "
                           "ended (cancel it first); afterwards its output and logs answer "
                           "410 job_erased, and a submission repeating its Idempotency-Key "
                           "too.",
            "responses": {"200": answer("erased", "JobDetail"), **errors(404, 409, 429)}}},
        "/api/v1/jobs/{job_id}/cancel": {"post": {
            "operationId": "cancelJob", "parameters": [JOB_ID],
            "responses": {"202": answer("cancelled, or stopping on its node", "Job"),
                          **errors(404, 409, 429)}}},
        "/api/v1/jobs/{job_id}/hold": {"post": {
            "operationId": "holdJob", "parameters": [JOB_ID],
            "description": "Hold a waiting job (QUEUED, RETRY_WAIT, or HELD behind the jobs it "
                           "runs after), or one placed that its node has not started yet "
                           "(SCHEDULED: its GPUs go back at once), out of the queue: HELD "
                           "until released, reserving no "
                           "credits (what its hold on them kept goes back; what it spent stays "
                           "spent). A running job that checkpoints is stopped at a checkpoint "
                           "first, as a preemption stops it: PREEMPTING with its `hold` set "
                           "(202), then HELD, and released it resumes from that checkpoint; "
                           "409 not_checkpointable for one that would start over, "
                           "job_cancelling. Holding a held job again changes "
                           "nothing.",
            "responses": {"200": answer("held", "Job"),
                          "202": answer("stopping at a checkpoint; HELD once it stopped",
                                        "Job"),
                          **errors(404, 409, 429)}}},
        "/api/v1/jobs/{job_id}/release": {"post": {
            "operationId": "releaseJob", "parameters": [JOB_ID],
            "description": "Release the client's hold: the job queues again, its wait counted "
                           "from now (one still stopping, once it stopped), or waits HELD for "
                           "the jobs it runs after, holding "
                           "what it may still cost again: 402 as at submission when the "
                           "credits or a budget no longer cover it (it stays held). 403 "
                           "held_by_operator for an operator's hold.",
            "responses": {"200": answer("released", "Job"),
                          "402": answer("insufficient_credits or budget_exceeded: still held",
                                        "Error"),
                          "403": answer("held_by_operator, or insufficient_scope", "Error"),
                          **errors(404, 409, 429)}}},
    }
