# Usage accounts per project and submitter. The accounts from before keep no user: that
# history counts for its project, and for the jobs of no known submitter, until it decays.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0011_job_retry_due_idx'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='usageaccount',
            name='user',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AlterField(
            model_name='usageaccount',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage_accounts', to='jobs.project'),
        ),
        migrations.AddConstraint(
            model_name='usageaccount',
            constraint=models.UniqueConstraint(condition=models.Q(('user__isnull', False)), fields=('project', 'user'), name='usage_account_per_user'),
        ),
        migrations.AddConstraint(
            model_name='usageaccount',
            constraint=models.UniqueConstraint(condition=models.Q(('user__isnull', True)), fields=('project',), name='usage_account_per_project'),
        ),
    ]
