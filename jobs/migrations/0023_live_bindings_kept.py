"""A GPU binding still held by a live attempt cannot be deleted, however the delete comes (a
job or attempt deleted with it, raw SQL): the job would lose its GPUs while it runs, and the
scheduler would hand them to another (DESIGN: a job is never deleted while it holds GPUs)."""

from django.db import migrations

from gpusched.pgsql import postgres_only

FORBID = """
CREATE OR REPLACE FUNCTION jobs_live_binding_kept() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'GPU binding % is live (attempt %): release it before deleting',
        OLD.id, OLD.attempt_id USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER jobs_live_binding_kept BEFORE DELETE ON jobs_gpubinding
    FOR EACH ROW WHEN (OLD.released_at IS NULL) EXECUTE FUNCTION jobs_live_binding_kept();
"""
ALLOW = """
DROP TRIGGER IF EXISTS jobs_live_binding_kept ON jobs_gpubinding;
DROP FUNCTION IF EXISTS jobs_live_binding_kept();
"""


class Migration(migrations.Migration):
    dependencies = [("jobs", "0022_job_list_index")]
    operations = [postgres_only(FORBID, ALLOW)]
