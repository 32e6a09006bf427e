from django.db import migrations, models


def _into_range(apps, schema_editor):
    """Retentions set past the service's range by admin's form before it was checked: 0
    (erase at once) is read as the hour a retention may be at least, one past a year as a
    year."""
    organization = apps.get_model("jobs", "Organization")
    organization.objects.filter(erase_after_hours__lt=1).update(erase_after_hours=1)
    organization.objects.filter(erase_after_hours__gt=8784).update(erase_after_hours=8784)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0059_webhook_job_erased"),
    ]

    operations = [
        migrations.RunPython(_into_range, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="organization",
            constraint=models.CheckConstraint(
                condition=models.Q(("erase_after_hours__isnull", True),
                                   ("erase_after_hours__range", (1, 8784)), _connector="OR"),
                name="org_retention_in_range",
                violation_error_message="A retention is 1 to 8784 hours, or none."),
        ),
    ]
