from django.urls import path

from jobs.api.views import JobDetail, JobListCreate

urlpatterns = [
    path("jobs", JobListCreate.as_view(), name="job-list"),
    path("jobs/<int:job_id>", JobDetail.as_view(), name="job-detail"),
]
