"""A request rate per tier for the API, set on the default tiers (jobs/defaults.py)."""

from django.db import migrations, models

from jobs.defaults import DEFAULT_API_REQUESTS_PER_MIN


def set_defaults(apps, schema_editor):
    Tier = apps.get_model("jobs", "Tier")
    for name, rate in DEFAULT_API_REQUESTS_PER_MIN.items():
        Tier.objects.filter(name=name).update(api_requests_per_min=rate)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0016_job_live_state_idx"),
    ]

    operations = [
        migrations.AddField(
            model_name="tier",
            name="api_requests_per_min",
            field=models.PositiveIntegerField(
                blank=True, null=True,
                help_text="API requests an organization of this tier may make a minute, all "
                          "its keys together; past it, 429 rate_limited. Empty: no limit."),
        ),
        migrations.RunPython(set_defaults, migrations.RunPython.noop),
    ]
