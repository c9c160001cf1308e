"""Where each mirrored log's copy lives: a SQLite file per log under ``DIR/logs/`` (the
default), or, with a ``postgresql://`` URL, a schema per log in that one database.

A PostgreSQL log store holds one log per set of tables; a mirror holds several logs, so each
copy gets a schema of its own, ``mirror_<first 16 hex digits of the origin hash>``, selected
with ``search_path`` on the store's connections. The mirror's checkpoint state stays in
``DIR/mirror.db`` either way: it is a few rows per log.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ledger.cosigner.cosigner import origin_hash
from ledger.storage.base import LogStore, StoreError
from ledger.storage.sqlite import SqliteStore

__all__ = ["COPIES_DIR", "copy_schema", "is_postgres_url", "open_copy_store"]

COPIES_DIR = "logs"


def is_postgres_url(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://"))


def copy_schema(origin: str) -> str:
    """The PostgreSQL schema of a log's copy (a fixed, quoting-free identifier)."""
    return f"mirror_{origin_hash(origin)[:16]}"


def _with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "search_path"]
    query.append(("search_path", schema))
    return urlunsplit(parts._replace(query=urlencode(query)))


async def open_copy_store(origin: str, data: Path, database: str | None) -> LogStore:
    """The store of ``origin``'s copy, created when missing."""
    if database is None:
        (data / COPIES_DIR).mkdir(exist_ok=True, mode=0o700)
        return await SqliteStore.open(data / COPIES_DIR / f"{origin_hash(origin)}.db",
                                      create=True)
    if not is_postgres_url(database):
        raise StoreError(f"--database wants a postgresql:// URL, not {database[:40]!r}")
    # deferred: optional (the ``postgres`` extra); a StoreError that says so when missing
    from ledger.storage.postgres import PostgresStore

    schema = copy_schema(origin)
    import asyncpg  # deferred: as above (present once the backend imported); makes the schema

    try:
        conn = await asyncpg.connect(database, timeout=30)
        try:
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        finally:
            await conn.close()
    except (OSError, asyncpg.PostgresError) as e:
        raise StoreError(f"cannot prepare schema {schema} in the database: {e}") from None
    return await PostgresStore.open(_with_search_path(database, schema), retry_for=30.0)
