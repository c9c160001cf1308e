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

from ledger.storage.base import POSTGRES_EXTRA_MISSING, StoreError
from notary.core.databases import MEMORY, database_problem, is_memory, is_postgres, store_kind
from notary.store.base import NotaryStore
from notary.store.memory import MemoryNotaryStore
from notary.store.sqlite import SqliteNotaryStore

__all__ = ["MEMORY", "check_database", "database_problem", "is_memory", "is_postgres", "open_store",
           "store_kind"]


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
