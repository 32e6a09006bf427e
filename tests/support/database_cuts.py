"""PostgreSQL connections ended under the product, as a failover, a restarted pooler or a
network blip ends them: by the server (pg_terminate_backend), so the product meets the
errors it would meet there."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg2
from django.db import connection


def own_pid() -> int:
    """The server process behind this thread's connection."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def cut(pid: int) -> None:
    """End the connection served by `pid` (another thread's): its next use raises
    OperationalError."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


def cut_own() -> None:
    """End this thread's connection, which ends the very query that asks it."""
    with connection.cursor() as cursor, contextlib.suppress(Exception):
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def cut_all_but_own() -> int:
    """End every other connection to this database; returns how many there were."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return cursor.fetchone()[0]


@contextlib.contextmanager
def database_away() -> Iterator[int]:
    """New connections refused and every other one cut till the block ends (this thread's
    own stays); yields how many were cut. PostgreSQL takes both from a connection to another
    database."""
    db, mine = connection.settings_dict, own_pid()
    admin = psycopg2.connect(dbname="postgres", user=db["USER"], password=db["PASSWORD"],
                             host=db["HOST"] or None, port=db["PORT"] or None)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{db["NAME"]}" ALLOW_CONNECTIONS false')
            cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = %s AND pid <> %s", [db["NAME"], mine])
            yield cursor.fetchone()[0]
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{db["NAME"]}" ALLOW_CONNECTIONS true')
        admin.close()
