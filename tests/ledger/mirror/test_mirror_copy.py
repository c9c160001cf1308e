"""The mirror's log copy on each ``LogStore`` backend (memory, SQLite, PostgreSQL): packages
committed in pieces, overlapping and resent, by two handles on one store (as two processes
would), build the log's own tiles; a copy reopened resumes at the size it had durably reached;
and the mirror's checkpoint state only ever moves forward."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import asyncpg

from ledger.cli.mirror import close_mirror, open_mirror
from ledger.client.http import HttpClient
from ledger.client.mirror import LogReaderSource, MirrorClient
from ledger.core.checkpoint import Checkpoint
from ledger.core.note import Ed25519Signer, NoteSignature, open_note, parse_note, sign_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tiles import tiles_for_size
from ledger.cosigner.cosigner import WitnessSigner, origin_hash
from ledger.log.facade import Log
from ledger.mirror.copy import LogCopy
from ledger.mirror.server import create_mirror_app
from ledger.mirror.state import MirrorState, PendingCheckpoint
from ledger.mirror.stores import copy_schema
from ledger.storage.memory import MemoryStore
from tests.servers import serving
from tests.stores import StoreFactory

ORIGIN = "example.test/copied"


async def test_a_copy_built_in_pieces_is_the_log_tile_for_tile(stores: StoreFactory) -> None:
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    await log.append_many([b"copied %d" % i + b"." * (i % 300) for i in range(1100)])
    entries = await log.reader.entries(0, 1100)
    first = await LogCopy.open(ORIGIN, await stores.open())
    second = await LogCopy.open(ORIGIN, await stores.open()) if stores.shared else first
    assert first.size == 0
    # Out of order (a gap is not stored), overlapping, resent, and from two handles at once.
    assert await first.append(300, entries[300:400]) == 0
    assert await first.append(0, entries[0:256]) == 256
    assert await second.append(200, entries[200:512]) == 512
    assert await first.append(0, entries[0:10]) == 512
    await asyncio.gather(first.append(512, entries[512:800]), second.append(512, entries[512:900]))
    assert await first.append(700, entries[700:1100]) == 1100
    assert await first.root_at(1100) == await _root(log, 1100)
    assert await second.root_at(777) == await _root(log, 777)
    for tile in tiles_for_size(1100, entries=True):
        assert await second.tile(tile.level, tile.index, tile.width) == \
            await log.reader.tile(tile.level, tile.index, tile.width), tile.path()
    if stores.shared:
        await second.close()
        reopened = await LogCopy.open(ORIGIN, await stores.open())
        assert reopened.size == 1100
        assert await reopened.append(1000, entries[1000:1100]) == 1100
        await reopened.close()
    await first.close()
    await log.close()


async def _root(log: Log, size: int) -> bytes:
    from ledger.log.tree_state import root_at  # deferred: only this check needs it

    return await root_at(log.store.read_tiles, size)


async def test_the_mirror_checkpoint_never_moves_back(tmp_path: Path) -> None:
    log_key = Ed25519Signer.generate(ORIGIN)
    key = SubtreeCosignatureSigner.generate("mirror.test/state")
    state = await MirrorState.open(tmp_path / "m.db", [key.verifier_key_text()])
    own = [(key.name, key.key_id)]

    def pending(size: int, root: bytes) -> PendingCheckpoint:
        note = sign_note(Checkpoint(ORIGIN, size, root).text(), log_key)
        return PendingCheckpoint(size, root, note)

    def cosign(text: str) -> list[NoteSignature]:
        return [key.cosign(text, 1_700_000_000)]

    mirrored, sigs = await state.commit(ORIGIN, pending(10, b"\x01" * 32), cosign, own)
    assert mirrored is not None and mirrored.size == 10 and len(sigs) == 1
    # The same checkpoint again: the stored cosignature, not a new one.
    again, sigs2 = await state.commit(ORIGIN, pending(10, b"\x01" * 32), cosign, own)
    assert sigs2 == sigs and again == mirrored
    # Smaller, or another root at the same size: refused, nothing changes.
    for size, root in ((9, b"\x01" * 32), (10, b"\x02" * 32)):
        current, none = await state.commit(ORIGIN, pending(size, root), cosign, own)
        assert none == [] and current == mirrored
    await state.close()
    # Durable: reopened, the served note carries the log's line and the mirror's.
    state = await MirrorState.open(tmp_path / "m.db", [key.verifier_key_text()])
    stored = await state.mirrored(ORIGIN)
    assert stored == mirrored
    assert stored is not None
    assert [s.name for s in parse_note(stored.note).signatures] == [ORIGIN, key.name]
    await state.close()


async def test_a_mirror_keeps_its_copies_in_postgresql(tmp_path: Path, pg_url: str) -> None:
    """``--database postgresql://…``: each log's copy in a schema of its own; a restarted
    mirror resumes from it and serves the log's tiles."""
    log_key = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=log_key)
    key = SubtreeCosignatureSigner.generate("mirror.test/pg")
    signers: list[WitnessSigner] = [key]
    logs = {ORIGIN: [log_key.verifier()], "example.test/other": [log_key.verifier()]}
    await log.append_many([b"pg %d" % i for i in range(600)])
    head = await log.head(0)
    assert head is not None
    mirror = await open_mirror(signers, logs, tmp_path / "data", pg_url)
    try:
        async with serving(create_mirror_app(mirror)) as served, \
                aiohttp.ClientSession() as http:
            client = MirrorClient(served.url, [key.verifier()], HttpClient(http))
            await client.push(head.note, LogReaderSource(log.reader))
    finally:
        await close_mirror(mirror)
    conn = await asyncpg.connect(pg_url)
    schemas = {r[0] for r in await conn.fetch(
        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'ledger_tiles'")}
    await conn.close()
    assert schemas == {copy_schema(ORIGIN), copy_schema("example.test/other")}
    mirror = await open_mirror(signers, logs, tmp_path / "data", pg_url)
    try:
        assert mirror.copies[ORIGIN].size == 600
        assert mirror.copies["example.test/other"].size == 0
        async with serving(create_mirror_app(mirror)) as served, \
                aiohttp.ClientSession() as http:
            prefix = f"{served.url}/{origin_hash(ORIGIN)}"
            async with http.get(prefix + "/checkpoint") as r:
                note = await r.read()
            open_note(note, [key.verifier()])
            for tile in tiles_for_size(600, entries=True):
                async with http.get(f"{prefix}/{tile.path()}") as r:
                    assert await r.read() == await log.reader.tile(tile.level, tile.index,
                                                                   tile.width)
    finally:
        await close_mirror(mirror)
        await log.close()
