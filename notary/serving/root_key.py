"""Replacing ``log.key`` in a compromised roll, so that no kill -9 loses the active log's key.

Every log's key is derived from ``log.key`` (the *root*, docs/lifecycle.md); an emergency roll
(``notary log roll --reason compromised``) makes a new root, from which the next log's key is
derived. The steps, each of which a kill may interrupt:

1. the new root is written to ``log.key.next`` (0600, fsynced): nothing uses it yet; a roll
   run again after a kill here reuses it (it never signed anything);
2. the roll commits (one store transaction): the registry's active log now has keys only the
   new root makes;
3. ``log.key`` is kept as ``log.key.retired-<generation>`` (a hard link, so ``log.key`` is never
   missing), then ``log.key.next`` is renamed over ``log.key``.

A kill between 2 and 3 leaves ``log.key.next`` making the active log's keys: the next start
(``notary serve``, any ``notary log`` command) finishes step 3 (:func:`recover_root`). Nothing
reads a retired root again; the operator may delete it.
"""

from __future__ import annotations

import contextlib
import os

from ledger.core.note import Ed25519Signer
from ledger.process.atomic import fsync_dir
from ledger.process.keyfile import KeyFileError, read_secret, write_secret
from ledger.storage.base import LogRecord
from notary.core.logs import COMPROMISED, key_generations
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import Rolled, own_signer, roll
from notary.store.base import NotaryStore

__all__ = ["emergency_roll", "install_new_root", "prepare_new_root", "recover_root", "root_for"]


def prepare_new_root(paths: Paths, name: str) -> Ed25519Signer:
    """Step 1: the new root, in ``log.key.next`` (the one an interrupted roll left, if any)."""
    if paths.log_key_next.exists():
        return Ed25519Signer.from_private_key(read_secret(paths.log_key_next))
    signer = Ed25519Signer.generate(name)
    write_secret(paths.log_key_next, signer.private_key_text())
    return signer


def install_new_root(paths: Paths, retired_generation: int) -> None:
    """Step 3, once the roll committed: the old root kept aside, the new one is ``log.key``."""
    retired = paths.retired_log_key(retired_generation)
    # Idempotent: a running notary finishing a roll it followed may race the roll command.
    with contextlib.suppress(FileExistsError):
        os.link(paths.log_key, retired)
    with contextlib.suppress(FileNotFoundError):
        os.replace(paths.log_key_next, paths.log_key)
    fsync_dir(paths.root)


def root_for(paths: Paths, record: LogRecord) -> Ed25519Signer | None:
    """The root key file of this data directory that makes ``record``'s keys, if one does
    (``log.key``, or ``log.key.next`` while a compromised roll is installing it): a running
    notary reads it when it follows a compromised roll made on this machine."""
    for path in (paths.log_key, paths.log_key_next):
        try:
            root = Ed25519Signer.from_private_key(read_secret(path))
        except (OSError, ValueError, KeyFileError):
            continue
        if own_signer(root, record) is not None:
            return root
    return None


def recover_root(paths: Paths, records: list[LogRecord]) -> Ed25519Signer:
    """``log.key``, after finishing a compromised roll that committed but was killed before
    step 3 (``log.key.next`` then makes the active log's keys and ``log.key`` does not)."""
    root = load_log_key(paths)
    if not records or not paths.log_key_next.exists():
        return root
    active = records[-1]
    if own_signer(root, active) is not None:
        return root  # a roll killed before it committed: its log.key.next is reused by the next
    new = Ed25519Signer.from_private_key(read_secret(paths.log_key_next))
    if own_signer(new, active) is None:
        return root  # neither: the caller's check says what to copy
    install_new_root(paths, key_generations([r.reason for r in records])[-1] - 1)
    return new


async def emergency_roll(store: NotaryStore, paths: Paths, root: Ed25519Signer, *,
                         clock: float | None = None) -> Rolled:
    """``notary log roll --reason compromised``: steps 1 to 3 above."""
    new_root = prepare_new_root(paths, root.name)
    rolled = await roll(store, root, reason=COMPROMISED, clock=clock, new_root=new_root)
    install_new_root(paths, key_generations([r.reason for r in await store.logs()])[-2])
    return rolled
