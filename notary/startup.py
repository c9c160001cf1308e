"""Opening a notary: its store (created, or migrated from an older layout), its receipt keys
registered, its log and sequencer started. ``notary serve`` does this once per process; tests
and embedding applications call :func:`open_notary` for the same notary without HTTP."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from ledger.log import Log
from ledger.sequencer import BatchObserver
from ledger.storage.base import CheckpointRecord
from notary.config import Settings
from notary.keys import Paths, load_log_key, register_key_files
from notary.service import Notary
from notary.store import open_store
from notary.store.base import NotaryStore
from notary.store.sqlite import SqliteNotaryStore

__all__ = ["WITHHELD_LOGGED", "entry_url_bases", "open_notary", "open_notary_store"]

_log = structlog.get_logger("notary")

WITHHELD_LOGGED = 20
"""Withheld receipt ids named in the start-up log (their count always is)."""


def entry_url_bases(settings: Settings, origin: str) -> list[str]:
    """Base URLs receipts of an older store layout may have been signed with: the current one,
    then the default of a first run (``http(s)://`` + the origin, which was derived from it)."""
    return list(dict.fromkeys([settings.base_url, f"http://{origin}", f"https://{origin}"]))


async def open_notary_store(settings: Settings, origin: str, *, extra_bases: Sequence[str] = ()
                            ) -> NotaryStore:
    """The store ``settings`` select, created or migrated, what the migration did logged."""
    store = await open_store(settings.database, Paths(settings.data).db, create=True,
                             entry_url_bases=[*extra_bases, *entry_url_bases(settings, origin)])
    report = store.migration if isinstance(store, SqliteNotaryStore) else None
    if report is not None and report.changed:
        _log.info("notary_store_migrated", from_version=report.from_version,
                  receipts=report.migrated, entry_url_prefixes=report.prefixes)
    if report is not None and report.withheld:
        _log.warning("receipts_withheld", count=len(report.withheld),
                     receipts=[i for i, _ in report.withheld[:WITHHELD_LOGGED]],
                     reason=report.withheld[0][1], fix="notary migrate --base-url URL")
    return store


async def open_notary(settings: Settings, *, observer: BatchObserver | None = None,
                      trusted: CheckpointRecord | None = None) -> Notary:
    """A running notary for an initialised data directory (``notary.http.app.init_data_dir``).

    ``trusted`` is the newest checkpoint this notary saw committed in an earlier run
    (``seen-checkpoint.json``): its writer refuses a store that does not extend it.

    Close it with ``await notary.log.close()``: the sequencer drains, then the store closes.
    """
    paths = Paths(settings.data)
    signer = load_log_key(paths)
    store = await open_notary_store(settings, signer.name)
    try:
        await register_key_files(paths, store)
        notary = Notary(store, paths, settings.base_url)
        await notary.refresh_keys(force=True)
    except BaseException:
        await store.close()
        raise
    # Log.open closes the store itself if the log cannot start.
    notary.log = await Log.open(store, signer=signer, hook=notary.hook, screen=notary.screen,
                                observer=observer, max_batch=settings.max_batch,
                                trusted=trusted)
    return notary
