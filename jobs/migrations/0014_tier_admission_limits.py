"""Admission limits on tiers: the per-organization queue limit gets its meaning in help
text, and the backlog past which a tier's new jobs are shed is added, set on the default
paid and free tiers (jobs/defaults.py)."""

from django.db import migrations, models

from jobs.defaults import DEFAULT_SHED_AFTER_BACKLOG_S


def set_defaults(apps, schema_editor):
    Tier = apps.get_model("jobs", "Tier")
    for name, seconds in DEFAULT_SHED_AFTER_BACKLOG_S.items():
        Tier.objects.filter(name=name).update(shed_after_backlog_s=seconds)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0013_membership_weight"),
    ]

    operations = [
        migrations.AddField(
            model_name="tier",
            name="shed_after_backlog_s",
            field=models.PositiveIntegerField(
                blank=True, null=True,
                help_text="Refuse new jobs of this tier (429) while the work waiting at or "
                          "above it would keep the whole fleet busy longer than this; empty: "
                          "never."),
        ),
        migrations.AlterField(
            model_name="tier",
            name="max_queued_jobs_per_org",
            field=models.PositiveIntegerField(
                blank=True, null=True,
                help_text="An organization's waiting jobs past which a new one is refused "
                          "(429); empty: no limit."),
        ),
        migrations.RunPython(set_defaults, migrations.RunPython.noop),
    ]
