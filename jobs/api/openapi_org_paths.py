"""The organization's calls as OpenAPI paths: its projects, members, settings, audit trail,
keys, webhooks and credits (jobs/api/openapi.py assembles the document with the jobs' calls
of jobs/api/openapi_paths.py, whose helpers these share)."""

from __future__ import annotations

from credits.api.views import TransferListQuery, UsageQuery
from jobs.api.openapi_paths import answer, errors, query_params, ref
from jobs.api.openapi_schemas import TRANSFER
from jobs.api.paging import PageQuery
from jobs.api.queries import DeliveryQuery
from jobs.api.schema_fields import ANY_OBJECT, INT, STR, TIME, nullable, obj, request_schema
from jobs.api.serializers import WebhookEndpointSerializer

HOOK_ID = {"name": "hook_id", "in": "path", "required": True, "schema": INT}
DELIVERY_ID = {"name": "delivery_id", "in": "path", "required": True, "schema": INT}
PROJECT_NAME = {"name": "name", "in": "path", "required": True, "schema": STR}
USERNAME = {"name": "username", "in": "path", "required": True, "schema": STR}


def _page(operation: str, description: str, item: dict) -> dict:
    """A GET answering the organization's rows newest first, a page at a time."""
    return {"operationId": operation, "parameters": query_params(PageQuery()), "responses": {
        "200": {"description": f"{description}, newest first, a page at a time", "content": {
            "application/json": {"schema": obj({"results": {"type": "array", "items": item},
                                                "next": nullable(STR)})}}},
        **errors(400, 429)}}


def _listing(operation: str, schema: str, description: str) -> dict:
    """A GET answering all of the organization's projects or members."""
    return {"operationId": operation, "responses": {
        "200": {"description": description, "content": {"application/json": {"schema": obj(
            {"results": {"type": "array", "items": ref(schema)}})}}},
        **errors(429)}}


def _settled(noun: str, parameter: dict, more: str) -> dict:
    """GET and PATCH of one of the organization's projects or members, by its name."""
    schema = noun.capitalize()
    return {
        "get": {"operationId": f"get{schema}", "parameters": [parameter],
                "responses": {"200": answer(f"the {noun}", schema), **errors(404, 429)}},
        "patch": {"operationId": f"change{schema}", "parameters": [parameter],
                  "description": f"Set the {noun}'s settings sent, all or none (null: no "
                                 f"cap, no budget); {more}",
                  "requestBody": {"required": True, "content": {"application/json": {
                      "schema": ref(f"{schema}Change")}}},
                  "responses": {"200": answer(f"the {noun} as set", schema),
                                **errors(400, 404, 429)}}}


def organization_paths() -> dict:
    return {
        "/api/v1/projects": {
            "get": _listing("listProjects", "Project", "the organization's projects: the "
                            "names a job's `project` may take"),
            "post": {"operationId": "createProject",
                     "requestBody": {"required": True, "content": {"application/json": {
                         "schema": ref("ProjectCreate")}}},
                     "responses": {"201": answer("made, as set", "Project"),
                                   **errors(400, 409, 429)}}},
        "/api/v1/projects/{name}": _settled("project", PROJECT_NAME, "its name stays."),
        "/api/v1/members": {"get": _listing("listMembers", "Member",
                                            "the organization's members, by username")},
        "/api/v1/members/{username}": {
            **_settled("member", USERNAME, "a role is an owner's to change, on the "
                                           "dashboard."),
            "delete": {"operationId": "removeMember", "parameters": [USERNAME],
                       "description": "Take the member out: their dashboard access ends and "
                                      "the organization's keys issued to them are revoked; "
                                      "the jobs they sent stay. An owner is taken out by "
                                      "owners, on the dashboard (403 owner_only).",
                       "responses": {"200": {"description": "taken out", "content": {
                           "application/json": {"schema": obj(
                               {"username": STR, "keys_revoked": INT})}}},
                                     "403": answer("owner_only, or insufficient_scope",
                                                   "Error"),
                                     **errors(404, 409, 429)}}},
        "/api/v1/gpu-types": {"get": {
            "operationId": "listGpuTypes",
            "responses": {"200": {"description": "each GPU type of the fleet: what a job's "
                                                 "gpu_types, min_gpu_memory_mb and region may "
                                                 "name, and its price; nodes dedicated to "
                                                 "another organization are left out",
                                  "content": {
                "application/json": {"schema": obj({"results": {"type": "array", "items": obj({
                    "gpu_type": STR, "gpus": INT,
                    "schedulable_gpus": {**INT, "description": "on nodes taking work now"},
                    "dedicated_gpus": {**INT, "description": "on nodes dedicated to the "
                                       "organization: only its jobs start there"},
                    "most_on_one_node": {**INT, "description": "the largest gang one node "
                                         "holds; larger ones span nodes of one island"},
                    "gpu_memory_mb": INT, "regions": {"type": "array", "items": STR},
                    "credits_per_gpu_hour": {**nullable(INT),
                                             "description": "null: it costs nothing"}})}})}}},
                **errors(429)}}},
        "/api/v1/organization": {
            "get": {"operationId": "getOrganization",
                    "responses": {"200": answer("the caller's organization, its tier, the "
                                                 "key in use, each limit beside what it uses "
                                                 "of it now, and its settings",
                                                 "Organization"),
                                  **errors(429)}},
            "patch": {"operationId": "changeOrganization",
                      "description": "Set what the organization sets for itself, those sent, "
                                     "all or none: its monthly budget and its low-credits "
                                     "threshold (one set above the credits available now "
                                     "sends credits.low at once).",
                      "requestBody": {"required": True, "content": {"application/json": {
                          "schema": ref("OrganizationChange")}}},
                      "responses": {"200": answer("the organization as set",
                                                   "Organization"),
                                    **errors(400, 429)}}},
        "/api/v1/events": {"get": _page(
            "listOrganizationEvents", "what the organization's people changed in it, and "
            "who", obj({"id": INT, "at": TIME,
                        "by": {**STR, "description": "a member's username, or 'key gs_…' "
                               "for a client's key"},
                        "action": {**STR, "description": "e.g. api_key.made, budget.set, "
                                   "webhook.removed, member.changed"},
                        "detail": ANY_OBJECT}))},
        "/api/v1/keys": {"get": _page(
            "listKeys", "the organization's API keys, never their secrets", ref("ApiKey"))},
        "/api/v1/webhooks": {
            "get": {"operationId": "listWebhooks", "responses": {
                "200": {"description": "the organization's endpoints", "content": {
                    "application/json": {"schema": obj(
                        {"results": {"type": "array", "items": ref("Webhook")}})}}},
                **errors(429)}},
            "post": {"operationId": "createWebhook",
                     "requestBody": {"required": True, "content": {"application/json": {
                         "schema": request_schema(WebhookEndpointSerializer())}}},
                     "responses": {"201": answer("created; the secret is shown this once",
                                                  "WebhookCreated"),
                                   **errors(400, 409, 429)}}},
        "/api/v1/webhooks/{hook_id}": {"delete": {
            "operationId": "deleteWebhook", "parameters": [HOOK_ID],
            "responses": {"204": answer("removed"), **errors(404, 429)}}},
        "/api/v1/webhooks/{hook_id}/rotate-secret": {"post": {
            "operationId": "rotateWebhookSecret", "parameters": [HOOK_ID],
            "description": "A new secret, shown this once. For a day the one before signs "
                           "each notice too (a second sha256= in X-Gpusched-Signature), so "
                           "the receiver moves to the new one without refusing any.",
            "responses": {"200": answer("rotated: the new secret", "WebhookRotated"),
                          **errors(404, 429)}}},
        "/api/v1/webhooks/{hook_id}/ping": {"post": {
            "operationId": "pingWebhook", "parameters": [HOOK_ID],
            "description": "Send the endpoint a signed test notice (event ping) now, "
                           "whatever its events, retried and read back as any delivery.",
            "responses": {"202": answer("sent (pending)", "Delivery"),
                          **errors(404, 429)}}},
        "/api/v1/webhooks/{hook_id}/deliveries": {"get": {
            "operationId": "listWebhookDeliveries",
            "parameters": [HOOK_ID, *query_params(DeliveryQuery())],
            "responses": {"200": {"description": "what was sent to the endpoint, newest "
                                                 "first, a page at a time", "content": {
                "application/json": {"schema": obj(
                    {"results": {"type": "array", "items": ref("Delivery")},
                     "next": nullable(STR)})}}},
                          **errors(400, 404, 429)}}},
        "/api/v1/webhooks/{hook_id}/deliveries/{delivery_id}/redeliver": {"post": {
            "operationId": "redeliverWebhook", "parameters": [HOOK_ID, DELIVERY_ID],
            "description": "Send a delivery that failed, or arrived, again now, with a fresh "
                           "round of attempts; one still pending keeps its schedule.",
            "responses": {"202": answer("sent again (pending)", "Delivery"),
                          **errors(404, 429)}}},
        "/api/v1/credits/transfers": {"get": {
            "operationId": "listCreditTransfers", "parameters": query_params(TransferListQuery()),
            "responses": {"200": {"description": "the organization's transfers, newest "
                                                 "first, a page at a time", "content": {
                "application/json": {"schema": obj(
                    {"results": {"type": "array", "items": TRANSFER},
                     "next": nullable(STR)})}}},
                          **errors(400, 429)}}},
        "/api/v1/credits/usage": {"get": {
            "operationId": "getCreditUsage", "parameters": query_params(UsageQuery()),
            "responses": {"200": answer("one month's credits spent and refunded and "
                                         "GPU-hours run, in all, by project and GPU type",
                                         "Usage"),
                          **errors(400, 429)}}},
        "/api/v1/credits": {"get": {
            "operationId": "getCredits",
            "responses": {"200": answer("the organization's credits", "Credits"),
                          **errors(429)}}},
    }
