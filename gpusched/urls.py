from django.conf import settings
from django.conf.urls.static import static
from django.contrib import admin
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import include, path

from jobs.models import Job
from jobs.scheduler.tick import capacity_advice
from jobs.states import JobState
from workers.models import Gpu, Node


def healthz(request):
    return JsonResponse({"ok": True})


def capacity(request):
    """What the last scheduling round says the fleet lacks, per GPU type (for autoscalers)."""
    return JsonResponse(capacity_advice())


def home(request):
    return render(request, "home.html", {
        "nodes": Node.objects.count(),
        "gpus": Gpu.objects.filter(health=Gpu.Health.HEALTHY).count(),
        "queued": Job.objects.filter(state=JobState.QUEUED).count(),
        "running": Job.objects.filter(state=JobState.RUNNING).count(),
    })


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("jobs.api.urls")),
    path("healthz", healthz),
    path("capacity", capacity),
    path("", home),
] + static(settings.MEDIA_URL, document_root=settings.MEDIA_ROOT)
