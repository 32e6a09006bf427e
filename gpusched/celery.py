"""The Celery app: configured from Django settings (CELERY_* names), tasks found per app."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpusched.settings")

app = Celery("gpusched")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
