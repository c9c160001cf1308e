"""Opening a notary: its data directory and keys on a first run, its store (created, or migrated
from an older layout), its receipt keys registered, its log and sequencer started. ``notary
serve`` does this once per process; tests and embedding applications call :func:`open_notary`
for the same notary without HTTP."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import NoteError
from ledger.log.sequencer import BatchObserver
from ledger.storage.base import CheckpointRecord
from notary.serving.commands import store_command
from notary.serving.config import ConfigError, Settings
from notary.serving.keys import (
    Paths,
    create_log_key,
    load_log_key,
    register_key_files,
    write_receipt_key,
)
from notary.serving.lifecycle import RootKeyMismatch, check_root, log_signer
from notary.serving.root_key import recover_root
from notary.serving.service import Notary
from notary.store import is_memory, is_postgres, open_store
from notary.store.base import NotaryStore
from notary.store.sqlite import SqliteNotaryStore

__all__ = ["WITHHELD_LOGGED", "FirstRun", "check_before_creating", "entry_url_bases",
           "init_data_dir", "open_notary", "open_notary_store"]

_log = structlog.get_logger("notary")

WITHHELD_LOGGED = 20
"""Withheld receipt ids named in the start-up log (their count always is)."""


def entry_url_bases(settings: Settings, origin: str) -> list[str]:
    """Base URLs receipts of an older store layout may have been signed with: the current one,
    then the default of a first run (``http(s)://`` + the origin, which was derived from it)."""
    return list(dict.fromkeys([settings.base_url, f"http://{origin}", f"https://{origin}"]))


@dataclass(frozen=True)
class FirstRun:
    """What a first run created: the log's verifier key (new, or copied in) and this frontend's
    receipt key id."""

    vkey: str
    kid: str
    new_log: bool = True  # False: a frontend joining a log whose key was copied into --data


def init_data_dir(settings: Settings) -> FirstRun | None:
    """Create the data directory and keys (0600) on first run (and the SQLite file, 0600, for
    the accounts it will hold); None if present. The store's tables are created when the store
    is first opened, and the receipt key is registered in it then. ``notary serve`` first runs
    :func:`check_before_creating`, which refuses a data directory this would
    get wrong (a log's store or verifier key without its private key)."""
    paths = Paths(settings.data)
    if paths.log_key.exists():
        signer = load_log_key(paths)
        if settings.origin and settings.origin != signer.name:
            raise ConfigError(
                f"this data directory's log has origin {signer.name!r}; "
                f"--origin {settings.origin!r} cannot change it"
            )
        if paths.receipt_keys.is_dir() and any(paths.receipt_keys.glob("*.key")):
            return None
        # Another frontend of a shared store (PostgreSQL): the log key was copied here, the
        # receipt key is this frontend's own (registered in the store when it opens, and
        # published by every frontend's JWKS).
        key = write_receipt_key(paths)
        return FirstRun(signer.verifier_key_text(), key.kid, new_log=False)
    paths.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    signer = create_log_key(paths, settings.default_origin)
    if not is_memory(settings.database) and not is_postgres(settings.database):
        os.close(os.open(paths.db, os.O_WRONLY | os.O_CREAT, 0o600))  # accounts live here: 0600
    key = write_receipt_key(paths)
    return FirstRun(signer.verifier_key_text(), key.kid)


async def check_before_creating(settings: Settings) -> None:
    """What ``notary serve`` checks before it creates anything in the data directory.

    A first run creates a log key; that is only right when there is no log yet. A frontend
    joining a PostgreSQL log that already has entries needs that log's key, copied from a
    running frontend: a new key would sign a checkpoint nobody trusts (and overwrite the
    ``log.vkey`` the operator copied in). The database is reached here too, so a start that
    cannot reach it fails before changing anything (StoreError). Raises ConfigError, with what
    to do, when the data directory cannot be used as it is.
    """
    paths = Paths(settings.data)
    has_key = paths.log_key.exists()
    copy = (f"copy log.key and log.vkey from a running frontend's data directory into "
            f"{settings.data}/ (log.key 0600), then start again; nothing was changed")
    if not has_key and paths.log_vkey.exists():
        raise ConfigError(f"{paths.log_vkey} is here but {paths.log_key} is not: a frontend "
                          f"of an existing log needs the log's private key too: {copy}")
    if is_memory(settings.database):
        return
    if not is_postgres(settings.database):
        if not has_key and paths.db.exists():
            raise ConfigError(f"{paths.db} holds a notary store but {paths.log_key} is missing:"
                              " restore log.key from the backup of this data directory (a new"
                              " key cannot sign its log); nothing was changed")
        return
    store = await open_store(settings.database, paths.db)
    try:
        latest = await store.latest()
        logs = await store.logs()
    finally:
        await store.close()
    if latest is None:
        return
    origin = latest.note.split(b"\n", 1)[0].decode("utf-8", "replace")
    if not has_key:
        raise ConfigError(f"the PostgreSQL database already holds the log {origin!r}, and this "
                          f"frontend has no {paths.log_key}: to join it, {copy}")
    if logs:
        return  # rolled: open_notary checks log.key against the active log's keys
    try:
        open_checkpoint(latest.note, load_log_key(paths).verifier())
    except (NoteError, ValueError):
        raise ConfigError(f"the PostgreSQL database holds the log {origin!r}, which "
                          f"{paths.log_key} does not sign (it is another log's key): to join "
                          f"it, {copy}") from None


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
                     reason=report.withheld[0][1],
                     fix=store_command(settings, "migrate", "--base-url", "URL"))
    return store


async def open_notary(settings: Settings, *, observer: BatchObserver | None = None,
                      trusted: CheckpointRecord | None = None) -> Notary:
    """A running notary for an initialised data directory (:func:`init_data_dir`).

    ``trusted`` is the newest checkpoint this notary saw committed in an earlier run
    (``seen-checkpoint.json``): its writer refuses a store that does not extend it.

    Close it with ``await notary.log.close()``: the sequencer drains, then the store closes.
    """
    paths = Paths(settings.data)
    root = load_log_key(paths)
    store = await open_notary_store(settings, root.name)
    try:
        await register_key_files(paths, store)
        logs = await store.logs()  # rolled: the newest log is the active one
        if logs:  # a compromised roll replaced log.key: finished here, or refused
            root = recover_root(paths, logs)
            try:
                check_root(root, logs, str(paths.log_key))
            except RootKeyMismatch as e:
                raise ConfigError(str(e)) from None
        signer = root if not logs else log_signer(root, logs[-1])
        if logs:
            store.use_log(logs[-1].n)
        if trusted is not None and not trusted.note.startswith(f"{signer.name}\n".encode()):
            trusted = None  # a checkpoint of a log frozen since: not this writer's tree
        notary = Notary(store, paths, settings.base_url, signer, max_batch=settings.max_batch,
                        observer=observer, trusted=trusted, root=root,
                        sign_off_loop=not is_postgres(settings.database))
        await notary.start()
    except BaseException:
        await store.close()
        raise
    return notary
