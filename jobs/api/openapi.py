"""The client API described as OpenAPI 3.1, served at /api/v1/openapi.json.

Request bodies are derived from the serializers that validate them, so they cannot drift;
answers are written out (jobs/api/openapi_schemas.py), and tests/integration/test_openapi.py
checks real answers of every call against them (no key the document does not name, none it
requires missing).
"""

from __future__ import annotations

import re

from django.urls import resolve

from jobs.api.openapi_org_paths import organization_paths
from jobs.api.openapi_paths import answer, job_paths, ref
from jobs.api.openapi_schemas import component_schemas
from jobs.api.scopes import needed_scope


def _notice(summary: str, schema: str) -> dict:
    return {"post": {
        "summary": summary,
        "description": "Headers X-Gpusched-Event, X-Gpusched-Timestamp and "
                       "X-Gpusched-Signature: sha256= HMAC-SHA256 of '<timestamp>.<body>' under "
                       "the endpoint's secret (for a day after a rotation, a second one "
                       "under the secret before, comma separated: accept either). At least "
                       "once: deduplicate by `delivery`.",
        "requestBody": {"content": {"application/json": {"schema": ref(schema)}}},
        "responses": {"200": {"description": "any 2xx: delivered"}}}}


def _with_scopes(calls: dict) -> dict:
    """Each call's least key scope (`x-key-scope`), read from the view that answers it, and
    a 403 on the calls a narrower key is refused."""
    for path, operations in calls.items():
        view = resolve(re.sub(r"\{\w+\}", "1", path)).func.view_class
        for method, operation in operations.items():
            scope = operation["x-key-scope"] = needed_scope(method.upper(), view)
            if scope != "read":
                operation["responses"].setdefault("403", answer(
                    f"insufficient_scope: the key's scope is narrower than {scope}", "Error"))
    return calls


def openapi_document() -> dict:
    return {
        "openapi": "3.1.0",
        "info": {"title": "gpusched", "version": "1",
                 "description": "Submit GPU jobs, follow them, cancel them; webhooks and "
                                "credits. Errors are {error: {code, message, ...}}. Answers "
                                "counted against the organization's request rate carry "
                                "RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset "
                                "(seconds)."},
        "security": [{"apiKey": []}],
        "paths": _with_scopes({**job_paths(), **organization_paths()}),
        "webhooks": {
            "jobMoved": _notice("A job moved into one of the endpoint's events, or its "
                                "content was erased (job.erased)", "Notice"),
            "creditsLow": _notice("The organization's available credits fell below its "
                                  "low_credits_threshold (once per fall)", "CreditsNotice"),
            "creditsRefunded": _notice("An operator gave back what one of the "
                                       "organization's jobs spent, or a part of it",
                                       "RefundNotice"),
            "ping": _notice("A test notice its owner asked for (POST "
                            "/api/v1/webhooks/{hook_id}/ping)", "PingNotice"),
            "organizationSuspended": _notice("An operator suspended the organization "
                                             "(organization.suspended, with the reason) or "
                                             "resumed it (organization.resumed)",
                                             "OrganizationNotice")},
        "components": {
            "securitySchemes": {"apiKey": {
                "type": "http", "scheme": "bearer",
                "description": "an organization's API key, gs_…, of scope read (every GET), "
                               "jobs (and submit, change, cancel jobs) or full (and "
                               "webhooks, projects and members): each call's `x-key-scope` names "
                               "the least"}},
            "schemas": component_schemas()},
    }
