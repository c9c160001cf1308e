"""Catching up with the commits of other processes on the same log: the tree state at the
stored checkpoint, verified, and refused if it does not extend what this process saw.

A writer (:class:`ledger.log.sequencer.Sequencer`) calls :func:`caught_up` at start and, under
the log's lock, whenever the stored checkpoint is not its own last one. Two paths give the same
state: a few new entries are read and integrated onto the writer's own state (:func:`grown`),
more are rebuilt from the stored tiles (:func:`verified_state`).
"""

from __future__ import annotations

from ledger.core.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from ledger.core.compact import TreeState, integrate
from ledger.core.errors import LedgerError
from ledger.core.note import Ed25519Signer, NoteError
from ledger.core.tiles import TILE_WIDTH
from ledger.log.errors import LogIntegrityError, LogRollbackError
from ledger.log.tree_state import ReadTiles, load_state, prefetching, root_at, root_tiles
from ledger.storage.base import CheckpointRecord, StoreError, WriteTx

CATCH_UP_ENTRIES = 4 * TILE_WIDTH
"""At most this many entries appended by another process are caught up by integrating them
(:func:`grown`); more are caught up from the stored tiles."""


async def verified_state(read_tiles: ReadTiles, latest: CheckpointRecord, origin: str,
                         signer: Ed25519Signer) -> TreeState:
    """The tree state at ``latest``, rebuilt from the stored tiles, once its note verifies
    under the log's key for ``origin`` and the rebuilt root is the one it signs."""
    try:
        cp, _ = open_checkpoint(latest.note, signer.verifier())
    except NoteError as e:
        raise LogIntegrityError(
            f"the stored checkpoint does not verify under this log's key: {e}") from e
    if cp.origin != origin or cp.size != latest.size:
        raise LogIntegrityError(
            f"the stored checkpoint is for {cp.origin!r} size {cp.size}, expected "
            f"{origin!r} size {latest.size}")
    state = await load_state(read_tiles, cp.size)
    if state.root() != cp.root_hash:
        raise LogIntegrityError(
            f"the root recomputed from stored tiles at size {cp.size} is "
            f"{state.root().hex()}, but the signed checkpoint says {cp.root_hash.hex()}")
    return state


async def caught_up(tx: WriteTx, latest: CheckpointRecord, seen: CheckpointRecord | None,
                    state: TreeState, origin: str, signer: Ed25519Signer) -> TreeState:
    """The verified state at the stored checkpoint ``latest``, from the writer's ``state``
    and the newest checkpoint it saw committed (``seen``); LogRollbackError if the stored
    tree does not extend ``seen`` (a restored or failed-over database lost commits)."""
    fast = await grown(tx, latest, seen, state, origin, signer)
    if fast is not None:
        return fast
    check_seen = seen is not None and seen.size > 0 and seen.note != latest.note
    # The tiles for the check below are read with the state's, in one read of the store
    # (on PostgreSQL a round trip less while the log's lock is held).
    read_tiles = prefetching(tx.read_tiles, root_tiles(seen.size) if check_seen and
                             seen is not None and seen.size < latest.size else [])
    if seen is not None and latest.size < seen.size:
        raise LogRollbackError(
            f"the store's checkpoint is at size {latest.size}, older than size "
            f"{seen.size} that this process saw committed: the database was restored "
            "or failed over and lost commits; refusing to sign (it would fork the log)")
    stored = await verified_state(read_tiles, latest, origin, signer)
    if check_seen and seen is not None:
        try:
            seen_cp, _ = open_checkpoint(seen.note, signer.verifier())
        except NoteError as e:
            raise LogIntegrityError(f"a remembered checkpoint does not verify: {e}") from e
        root = stored.root() if seen.size == stored.size else await root_at(
            read_tiles, seen.size)
        if root != seen_cp.root_hash:
            raise LogRollbackError(
                f"the stored tree (size {latest.size}) does not contain the tree of "
                f"size {seen.size} that this process saw committed: the store was "
                "replaced or forked; refusing to sign")
    return stored


async def grown(tx: WriteTx, latest: CheckpointRecord, seen: CheckpointRecord | None,
                state: TreeState, origin: str, signer: Ed25519Signer) -> TreeState | None:
    """The stored checkpoint's state from the writer's own, when another process only
    appended a few entries since the writer's last commit (``seen``, at ``state``): their
    entries, read from the store, integrated here, and the checkpoint this process would sign
    for the result compared with the stored one.

    Ed25519 signatures are deterministic (RFC 8032), and every process of a log signs with
    the log key: the stored note is byte for byte the one signed here exactly when it
    commits to the same tree and its signature is the log key's. That proves the stored
    tree extends the one this process saw committed, for one signature (cheaper than
    verifying one) and the hashes of the new entries, where rebuilding the state from
    stored tiles (:func:`verified_state`) hashes whole tiles and verifies two signatures;
    with several processes on one log, small batches catch up on nearly every commit.
    None when it does not apply or the notes differ: the caller then takes the full path,
    which says what is wrong."""
    if seen is None or state.size != seen.size or \
            not 0 < latest.size - state.size <= CATCH_UP_ENTRIES:
        return None
    try:
        new = await tx.read_entries(state.size, latest.size)
        if len(new) != latest.size - state.size:
            return None
        done = integrate(state, new)
        note = sign_checkpoint(Checkpoint(origin, latest.size, done.state.root()), signer)
    except StoreError:  # the store itself failed: not a reason to take the slow path
        raise
    except (ValueError, LedgerError):  # a malformed bundle, an entry too large
        return None
    return done.state if note == latest.note else None
