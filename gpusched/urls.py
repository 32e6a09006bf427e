from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import include, path

from gpusched.health import healthz, readyz
from gpusched.login_guard import GuardedAdminAuthenticationForm, GuardedAuthenticationForm
from jobs.metrics import render as render_metrics
from jobs.models import Job
from jobs.scheduler.tick import capacity_advice
from jobs.states import JobState
from workers.models import Gpu, Node


def capacity(request):
    """What the last scheduling round says the fleet lacks, per GPU type (for autoscalers)."""
    return JsonResponse(capacity_advice())


def metrics(request):
    """Prometheus scrape target (jobs/metrics.py); like /capacity, for the operators' network."""
    return HttpResponse(render_metrics(), content_type="text/plain; version=0.0.4; charset=utf-8")


def home(request):
    return render(request, "home.html", {
        "nodes": Node.objects.count(),
        "gpus": Gpu.objects.filter(health=Gpu.Health.HEALTHY).count(),
        "queued": Job.objects.filter(state=JobState.QUEUED).count(),
        "running": Job.objects.filter(state=JobState.RUNNING).count(),
    })


admin.site.login_form = GuardedAdminAuthenticationForm

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("jobs.api.urls")),
    path("api/v1/", include("credits.api.urls")),
    path("accounts/login/", LoginView.as_view(authentication_form=GuardedAuthenticationForm),
         name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("dashboard/", include("jobs.web.urls")),
    path("healthz", healthz),
    path("readyz", readyz),
    path("capacity", capacity),
    path("metrics", metrics),
    path("", home),
]
# no public media: a job's output goes only to its organization (jobs/services/outputs.py)
