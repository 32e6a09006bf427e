"""Health endpoints for load balancers and orchestrators.

`/healthz`: the process answers (liveness; touches nothing). `/readyz`: it can serve, because
the database answers; 503 with the failing part otherwise. The cache not answering leaves it
ready but `degraded`: the API serves without it (gpusched/cache.py), and a Redis outage must
not take every web process out of its load balancer. It also says how long ago the scheduler
last ran a round, for the eye: a stopped scheduler does not make the web app unready (jobs
are still accepted and kept), but operators should hear of it (metrics).
"""

from __future__ import annotations

import time

from django.core.cache import cache
from django.db import connection
from django.http import JsonResponse

from jobs.metrics import LAST_TICK_KEY


def healthz(request):
    return JsonResponse({"ok": True})


def _database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        return f"{type(exc).__name__}: {exc}"
    return None


def _cache() -> str | None:
    try:
        cache.set("gpusched:readyz", 1, timeout=10)
        if cache.get("gpusched:readyz") != 1:
            return "the cache did not answer, or keep a value"
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return None


def readyz(request):
    problems = {"database": why} if (why := _database()) else {}
    degraded = {"cache": why} if (why := _cache()) else {}
    tick = cache.get(LAST_TICK_KEY) if not degraded else None
    body = {"ok": not problems, "problems": problems, "degraded": degraded,
            "scheduler_last_round_s_ago": round(time.time() - tick["at"], 1) if tick else None}
    return JsonResponse(body, status=503 if problems else 200)
