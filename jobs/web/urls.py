from django.urls import path

from credits.web import credits_page
from jobs.web import keys, submit, team, views, webhooks

urlpatterns = [
    path("", views.job_list, name="dashboard"),
    path("jobs/new", submit.job_new, name="dashboard-job-new"),
    path("jobs/cancel", views.jobs_cancel_labelled_view, name="dashboard-jobs-cancel"),
    path("jobs/<int:job_id>", views.job_detail, name="dashboard-job"),
    path("jobs/<int:job_id>/cancel", views.job_cancel_view, name="dashboard-job-cancel"),
    path("jobs/<int:job_id>/relax", views.job_relax_view, name="dashboard-job-relax"),
    path("jobs/<int:job_id>/output", views.job_output, name="dashboard-job-output"),
    path("jobs/<int:job_id>/attempts/<int:attempt_id>/log", views.job_log,
         name="dashboard-attempt-log"),
    path("credits", credits_page, name="dashboard-credits"),
    path("keys", keys.keys_page, name="dashboard-keys"),
    path("keys/<slug:slug>", keys.key_create, name="dashboard-key-create"),
    path("keys/<slug:slug>/<int:key_id>/revoke", keys.key_revoke, name="dashboard-key-revoke"),
    path("team", team.team_page, name="dashboard-team"),
    path("team/<slug:slug>/budget", team.organization_budget, name="dashboard-team-budget"),
    path("team/<slug:slug>/projects", team.project_new, name="dashboard-project-new"),
    path("team/<slug:slug>/projects/<int:project_id>", team.project_save,
         name="dashboard-project-save"),
    path("team/<slug:slug>/members/<int:membership_id>", team.member_save,
         name="dashboard-member-save"),
    path("team/<slug:slug>/members/<int:membership_id>/remove", team.member_out,
         name="dashboard-member-remove"),
    path("webhooks", webhooks.webhooks_page, name="dashboard-webhooks"),
    path("webhooks/<slug:slug>", webhooks.webhook_create, name="dashboard-webhook-create"),
    path("webhooks/<slug:slug>/<int:hook_id>/delete", webhooks.webhook_delete,
         name="dashboard-webhook-delete"),
    path("webhooks/<slug:slug>/<int:hook_id>/rotate", webhooks.webhook_rotate,
         name="dashboard-webhook-rotate"),
    path("webhooks/<slug:slug>/<int:hook_id>/ping", webhooks.webhook_ping_view,
         name="dashboard-webhook-ping"),
    path("webhooks/<slug:slug>/<int:hook_id>/deliveries/<int:delivery_id>/resend",
         webhooks.webhook_resend, name="dashboard-webhook-resend"),
]
