"""Transfers are the ledger's history: PostgreSQL refuses to change or delete one."""

from django.db import migrations

from gpusched.pgsql import postgres_only

FORBID = """
CREATE OR REPLACE FUNCTION credits_transfer_immutable() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'credit transfers are immutable: % refused on transfer %', TG_OP, OLD.id
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER credits_transfer_immutable BEFORE UPDATE OR DELETE ON credits_transfer
    FOR EACH ROW EXECUTE FUNCTION credits_transfer_immutable();
"""
ALLOW = """
DROP TRIGGER IF EXISTS credits_transfer_immutable ON credits_transfer;
DROP FUNCTION IF EXISTS credits_transfer_immutable();
"""


class Migration(migrations.Migration):
    dependencies = [("credits", "0001_initial")]
    operations = [postgres_only(FORBID, ALLOW)]
