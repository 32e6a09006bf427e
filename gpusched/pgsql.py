"""Migrations' PostgreSQL-only SQL (triggers the embedded SQLite demo does without)."""

from __future__ import annotations

from functools import partial

from django.db import migrations


def _execute(sql: str, apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        # no parameters, so that a literal % (as in RAISE formats) stays as written
        schema_editor.execute(sql, params=None)


def postgres_only(forward: str, backward: str) -> migrations.RunPython:
    """Run `forward` (`backward` when unapplied) on PostgreSQL, and nothing elsewhere."""
    return migrations.RunPython(partial(_execute, forward), partial(_execute, backward))
