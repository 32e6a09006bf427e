from django.urls import path

from jobs.api.views import (
    JobAttempts,
    JobCancel,
    JobDetail,
    JobEvents,
    JobListCreate,
    JobLog,
    JobOutput,
    JobsCancel,
    OpenApiDocument,
    QueueLine,
    WebhookDeliveries,
    WebhookDetail,
    WebhookListCreate,
    WebhookRedeliver,
)

urlpatterns = [
    path("jobs", JobListCreate.as_view(), name="job-list"),
    path("jobs/cancel", JobsCancel.as_view(), name="jobs-cancel"),
    path("jobs/<int:job_id>", JobDetail.as_view(), name="job-detail"),
    path("jobs/<int:job_id>/cancel", JobCancel.as_view(), name="job-cancel"),
    path("jobs/<int:job_id>/output", JobOutput.as_view(), name="job-output"),
    path("jobs/<int:job_id>/events", JobEvents.as_view(), name="job-events"),
    path("jobs/<int:job_id>/attempts", JobAttempts.as_view(), name="job-attempts"),
    path("jobs/<int:job_id>/attempts/<int:attempt_id>/log", JobLog.as_view(),
         name="attempt-log"),
    path("jobs/<int:job_id>/log", JobLog.as_view(), name="job-log"),
    path("queue", QueueLine.as_view(), name="queue-line"),
    path("webhooks", WebhookListCreate.as_view(), name="webhook-list"),
    path("webhooks/<int:hook_id>", WebhookDetail.as_view(), name="webhook-detail"),
    path("webhooks/<int:hook_id>/deliveries", WebhookDeliveries.as_view(),
         name="webhook-deliveries"),
    path("webhooks/<int:hook_id>/deliveries/<int:delivery_id>/redeliver",
         WebhookRedeliver.as_view(), name="webhook-redeliver"),
    path("openapi.json", OpenApiDocument.as_view(), name="openapi"),
]
