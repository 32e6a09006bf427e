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


def _workers(text: str) -> list[set[str]]:
    """The queues of each worker started in `text`."""
    return [set(match.group(1).split(","))
            for match in re.finditer(r"""-Q["',\s]+([a-z_,]+)""", text)]


WAYS = ("README.md", "docker/compose.yaml", "workers/management/commands/demo.py")


def test_each_way_of_running_consumes_every_queue():
    used = _queues_used()
    assert used == {"default", "scheduler", "notify"}
    for path in WAYS:
        missing = used - set().union(*_workers((ROOT / path).read_text()))
        assert not missing, f"{path} runs no worker for {sorted(missing)}"


def test_the_scheduler_tick_has_a_worker_of_its_own():
    """A sweep of minutes (erasures, expiry over remote storage) on the tick's one process
    would stop placing, reaping and preempting while it runs."""
    for path in WAYS:
        assert {"scheduler"} in _workers((ROOT / path).read_text()), path


def test_every_beat_entry_expires_as_the_database_scheduler_stores_it():
    """django-celery-beat keeps `expire_seconds` of an entry's options and drops the rest
    (Celery's `expires` among them): an entry without it piles up behind a busy worker."""
    from django_celery_beat.schedulers import ModelEntry

    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        assert ModelEntry._unpack_options(**entry["options"])["expire_seconds"], name
