from django.db import migrations

from jobs.defaults import DEFAULT_TIERS, TIER_FIELDS

SEQUENCE = "gpusched_fencing_token"



def create_sequence(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"CREATE SEQUENCE IF NOT EXISTS {SEQUENCE}")


def drop_sequence(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP SEQUENCE IF EXISTS {SEQUENCE}")


def create_tiers(apps, schema_editor):
    Tier = apps.get_model("jobs", "Tier")
    for name, *values in DEFAULT_TIERS:
        Tier.objects.get_or_create(name=name, defaults=dict(zip(TIER_FIELDS, values)))


class Migration(migrations.Migration):
    dependencies = [("jobs", "0001_initial")]

    operations = [
        migrations.RunPython(create_sequence, drop_sequence),
        migrations.RunPython(create_tiers, migrations.RunPython.noop),
    ]
