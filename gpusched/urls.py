from django.conf import settings
from django.conf.urls.static import static
from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path


def healthz(request):
    return JsonResponse({"ok": True})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("jobs.api.urls")),
    path("healthz", healthz),
] + static(settings.MEDIA_URL, document_root=settings.MEDIA_ROOT)
