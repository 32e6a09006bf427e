"""A request the database did not answer (a failover, a restart, a connection cut) is a 503
with Retry-After, which clients and proxies retry, not a 500: the same request succeeds once
the database is back, and a submission retried with its Idempotency-Key makes one job even
when the first did commit. An OperationalError is the database's (a connection refused or
cut, a serialization failure or deadlock, a statement timeout); an InterfaceError, a
connection used after it broke. A connection that broke is closed at once, so the next
request opens a new one."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError, close_old_connections
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger(__name__)
RETRY_AFTER_S = 5
MESSAGE = "the service's database did not answer; ask again in a few seconds"


class DatabaseAwayMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception
                          ) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        log.warning("%s %s: the database did not answer", request.method, request.path,
                    exc_info=exception)
        close_old_connections()  # those unusable: what Django does at a request's end
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        if request.path.startswith("/api/"):
            return JsonResponse({"error": {"code": "database_unavailable", "message": MESSAGE,
                                           "retry_after_s": RETRY_AFTER_S}},
                                status=503, headers=headers)
        return HttpResponse(MESSAGE.capitalize() + ".", status=503,
                            content_type="text/plain; charset=utf-8", headers=headers)
