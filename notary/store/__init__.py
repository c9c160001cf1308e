"""The notary's store: the typed contract (``base``) and its backends (``memory``, ``sqlite``,
``postgres``).

:func:`open_store` picks the backend from the ``database`` setting: empty for the SQLite file in
the data directory (the default), ``memory:`` for a throwaway store that lives as long as one
``notary serve`` process, a ``postgresql://`` URL for a database that any number of frontends
share (multi-host URLs with ``target_session_attrs=read-write`` find the primary).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from ledger.storage.base import POSTGRES_EXTRA_MISSING, StoreError
from notary.store.base import NotaryStore
from notary.store.memory import MemoryNotaryStore
from notary.store.sqlite import SqliteNotaryStore

__all__ = ["MEMORY", "check_database", "database_problem", "is_memory", "is_postgres", "open_store",
           "store_kind"]

MEMORY = "memory:"


def is_memory(database: str) -> bool:
    return database == MEMORY


def is_postgres(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://"))


def store_kind(database: str) -> str:
    """The backend's name for logs and messages: never the URL, which may hold a password."""
    return "postgresql" if is_postgres(database) else "memory" if is_memory(database) else "sqlite"


def _host_port_ok(text: str) -> bool:
    """``host``, ``host:port`` or ``[v6]:port`` of a (multi-host) libpq URL; an empty host is
    libpq's default (the local socket)."""
    host, sep, port = text.rpartition(":") if not text.endswith("]") else (text, "", "")
    if not sep:
        host, port = text, ""
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        return False
    return "/" not in host and " " not in host


def database_problem(database: str) -> str | None:
    """What is wrong with a ``database`` setting no backend understands, as a predicate of the
    word "database" (``"'x' is not supported: …"``), or None when a backend takes it.

    A PostgreSQL URL is never echoed: it may hold a password."""
    if is_postgres(database):
        parts = urlsplit(database)
        hosts = parts.netloc.rpartition("@")[2]
        if not all(_host_port_ok(h) for h in hosts.split(",")):
            return ("URL is malformed (expected postgresql://[user[:password]@]host[:port]"
                    "[,host2[:port]…]/dbname[?target_session_attrs=read-write])")
        if not parts.path.strip("/"):
            return "URL names no database (postgresql://host/dbname)"
        return None
    if database not in ("", MEMORY):
        return (f"{database!r} is not supported: leave it empty for the SQLite file in the data "
                f"directory, use {MEMORY!r}, or a postgresql://host/dbname URL")
    return None


def check_database(database: str) -> None:
    """Refuse a ``database`` setting no backend understands (StoreError names the choices)."""
    problem = database_problem(database)
    if problem is not None:
        raise StoreError(f"database {problem}")


async def open_store(database: str, sqlite_path: Path, *, create: bool = False,
                     entry_url_bases: Sequence[str] = ()) -> NotaryStore:
    """The notary store ``database`` selects (see the module doc).

    ``sqlite_path`` is the SQLite file (used when ``database`` is empty); ``create`` allows a
    new one; ``entry_url_bases`` are the base URLs older receipts may have been signed with,
    for migrating a store of an older layout (the current base URL first).
    """
    check_database(database)
    if is_memory(database):
        return MemoryNotaryStore()
    if is_postgres(database):
        try:
            # deferred: asyncpg is the optional `postgres` extra; the SQLite default never needs it
            from notary.store.postgres import PgNotaryStore
        except ImportError as e:
            if e.name is None or e.name.split(".")[0] != "asyncpg":
                raise
            raise StoreError(POSTGRES_EXTRA_MISSING) from None

        return await PgNotaryStore.open(database)
    return await SqliteNotaryStore.open(sqlite_path, create=create,
                                        entry_url_bases=entry_url_bases)
