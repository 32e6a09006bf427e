"""One error shape for every 4xx: {"error": {"code", "message", "fields"?}}."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from jobs.services.errors import ServiceError, ValidationFailed
from jobs.services.storable import storable

_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.ParseError: "malformed_request",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "rate_limited",
    exceptions.ValidationError: "invalid",
}


def exception_handler(exc, context):
    if isinstance(exc, ServiceError):
        body = {"code": exc.code, "message": exc.message}
        if exc.field:
            body["fields"] = {exc.field: [exc.message]}
        body.update(getattr(exc, "details", {}))
        body = _encodable(body)
        retry_after = exc.retry_after
        if retry_after is None:
            return Response({"error": body}, status=exc.status)
        body["retry_after_s"] = retry_after
        return Response({"error": body}, status=exc.status,
                        headers={"Retry-After": str(retry_after)})
    if isinstance(exc, RequestDataTooBig):  # Django would answer with an HTML page
        return Response({"error": {"code": "request_too_large", "message": str(exc)}},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    response = drf_handler(exc, context)
    if response is None:
        return None  # a real bug: let Django log it and answer 500
    code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), "error")
    if isinstance(exc, exceptions.ValidationError):
        body = {"code": code, "message": "the request is not valid",
                "fields": _encodable(response.data)}
    else:
        body = {"code": code, "message": storable(str(getattr(exc, "detail", exc)))}
    response.data = {"error": body}
    return response


def _encodable(data):
    """Messages that echo the client's input, with lone surrogates (valid in a JSON escape,
    not encodable as UTF-8) replaced: otherwise the refusal itself would fail to render."""
    if isinstance(data, dict):
        return {_encodable(k): _encodable(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_encodable(v) for v in data]
    return storable(data) if isinstance(data, str) else data


def gone(code: str, message: str) -> Response:
    return Response({"error": {"code": code, "message": message}}, status=status.HTTP_410_GONE)


def not_found(message: str = "no such job") -> Response:
    return Response({"error": {"code": "not_found", "message": message}},
                    status=status.HTTP_404_NOT_FOUND)


def refuse_unknown(data, allowed, *, code: str) -> None:
    """Refuse a body naming a field other than `allowed`: one the call does not take would
    otherwise be ignored, and the client believe it set."""
    unknown = sorted(set(data) - set(allowed)) if isinstance(data, dict) else []
    if unknown:
        raise ValidationFailed(f"{', '.join(unknown)} cannot be sent here; these can: "
                               f"{', '.join(allowed)}", code=code, field=unknown[0])
