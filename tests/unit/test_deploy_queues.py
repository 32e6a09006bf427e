"""Every queue that a task or a beat entry is sent to has a worker in each way the product
is run (README, docker compose, the demo): a queue nobody consumes loses its work silently."""

import re

from django.conf import settings

from tests.support.processes import ROOT


def _queues_used() -> set[str]:
    queues = {settings.CELERY_TASK_DEFAULT_QUEUE}
    queues |= {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    queues |= {entry.get("options", {}).get("queue", settings.CELERY_TASK_DEFAULT_QUEUE)
               for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    return queues


def _consumed(text: str) -> set[str]:
    found = set()
    for match in re.finditer(r"""-Q["',\s]+([a-z_,]+)""", text):
        found |= set(match.group(1).split(","))
    return found


def test_each_way_of_running_consumes_every_queue():
    used = _queues_used()
    assert used == {"default", "scheduler", "notify"}
    for path in ("README.md", "docker/compose.yaml", "workers/management/commands/demo.py"):
        missing = used - _consumed((ROOT / path).read_text())
        assert not missing, f"{path} runs no worker for {sorted(missing)}"
