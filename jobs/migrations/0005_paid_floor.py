"""Lower the paid tier's default floor from 40% to 20% of the fleet (see jobs/defaults.py).

Only a paid tier still at the old default changes: a floor an operator set stays as it is.
"""

from django.db import migrations

OLD, NEW = 0.40, 0.20


def lower(apps, schema_editor):
    Tier = apps.get_model("jobs", "Tier")
    Tier.objects.filter(name="paid", guaranteed_share=OLD).update(guaranteed_share=NEW)


def restore(apps, schema_editor):
    Tier = apps.get_model("jobs", "Tier")
    Tier.objects.filter(name="paid", guaranteed_share=NEW).update(guaranteed_share=OLD)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0004_attempt_preempted_for")]
    operations = [migrations.RunPython(lower, restore)]
