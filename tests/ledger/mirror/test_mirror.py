"""The tlog-mirror server (C2SP/C2SP at 5ba5ee8), fed from a real ledger ``Log`` by the mirror
client: tiles byte-identical to the log's, cosignatures that verify (ML-DSA-44 cross-checked
with dilithium-py) and cover only stored entries, and every status code of the spec for a
hostile client, which changes nothing."""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from dilithium_py.ml_dsa import ML_DSA_44
from structlog.testing import capture_logs

from ledger.cli.monitor import register as register_monitor
from ledger.cli.monitor import run as run_monitor
from ledger.client.http import HttpClient
from ledger.client.mirror import LogReaderSource, MirrorClient, MirrorRefused
from ledger.core.checkpoint import Checkpoint, parse_checkpoint_text
from ledger.core.cosignature import CosignatureSigner
from ledger.core.mirror_protocol import (
    MIRROR_INFO_CONTENT_TYPE,
    AddEntriesHeader,
    format_add_entries_header,
    format_package,
    package_at,
    package_count,
    parse_mirror_info,
)
from ledger.core.note import (
    Ed25519Signer,
    Note,
    NoteSignature,
    format_note,
    open_note,
    parse_note,
    sign_note,
)
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner, subtree_message
from ledger.core.tiles import tiles_for_size
from ledger.core.witness_protocol import format_add_checkpoint, format_sign_subtree
from ledger.cosigner.cosigner import origin_hash
from ledger.log.facade import Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.mirror.copy import LogCopy
from ledger.mirror.server import BodyEnded, Mirror, create_mirror_app
from ledger.mirror.state import MirrorState
from ledger.process.exitcodes import ExitCode
from ledger.storage.memory import MemoryStore
from ledger.storage.sqlite import SqliteStore
from tests.servers import serving

ORIGIN = "example.test/mirrored-log"
PQ_NAME = "mirror.test/pq"
ED_NAME = "mirror.test/ed"


@dataclass
class Setup:
    log: Log
    log_key: Ed25519Signer
    mirror: Mirror
    url: str
    http: aiohttp.ClientSession
    client: MirrorClient
    pq: SubtreeCosignatureSigner
    ed: CosignatureSigner

    @property
    def prefix(self) -> str:
        return f"{self.url}/{origin_hash(ORIGIN)}"

    async def grow(self, n: int) -> bytes:
        """Append ``n`` entries to the log; its new checkpoint note."""
        head = await self.log.head(0)
        base = 0 if head is None else head.size
        await self.log.append_many([b"entry %d " % (base + i) + b"x" * (i % 97)
                                    for i in range(n)])
        head = await self.log.head(0)
        assert head is not None
        return head.note

    async def push(self, note: bytes) -> list[NoteSignature]:
        return await self.client.push(note, LogReaderSource(self.log.reader))

    async def head_note(self) -> bytes:
        head = await self.log.head(0)
        assert head is not None
        return head.note

    async def post(self, path: str, body: bytes, headers: dict[str, str] | None = None
                   ) -> tuple[int, str, bytes]:
        hdrs = {"Content-Type": "application/octet-stream", **(headers or {})}
        async with self.http.post(self.url + path, data=body, headers=hdrs) as r:
            return r.status, r.content_type, await r.read()

    async def served(self) -> bytes | None:
        async with self.http.get(self.prefix + "/checkpoint") as r:
            return await r.read() if r.status == 200 else None

    async def snapshot(self) -> tuple[int, int, bytes | None]:
        """What a refused request must leave as it was: the pending size, the copy's size and
        the mirror checkpoint."""
        pending = await self.mirror.state.pending(ORIGIN)
        return (pending[0].size if pending else 0, self.mirror.copies[ORIGIN].size,
                await self.served())


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    log_key = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=log_key)
    pq = SubtreeCosignatureSigner.generate(PQ_NAME)
    ed = CosignatureSigner.generate(ED_NAME)
    state = await MirrorState.open(tmp_path / "mirror.db", [pq.verifier_key_text(),
                                                            ed.verifier_key_text()])
    copy = await LogCopy.open(ORIGIN, await SqliteStore.open(tmp_path / "copy.db", create=True))
    mirror = Mirror([pq, ed], {ORIGIN: [log_key.verifier()]}, state, {ORIGIN: copy},
                    max_body=4 * 1024 * 1024)
    async with serving(create_mirror_app(mirror)) as served, aiohttp.ClientSession() as http:
        client = MirrorClient(served.url, [pq.verifier(), ed.verifier()], HttpClient(http),
                              packages_per_request=2)
        yield Setup(log, log_key, mirror, served.url, http, client, pq, ed)
    await copy.close()
    await state.close()
    await log.close()


async def assert_same_tiles(s: Setup, size: int) -> None:
    """Every tile and bundle of a tree of ``size`` (full and partial), from the mirror, is the
    log's byte for byte, cached as immutable (tlog-tiles: every tile path is)."""
    for tile in tiles_for_size(size, entries=True):
        want = await s.log.reader.tile(tile.level, tile.index, tile.width)
        async with s.http.get(f"{s.prefix}/{tile.path()}") as r:
            assert r.status == 200, tile.path()
            assert await r.read() == want, tile.path()
            assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"


def check_cosigned(s: Setup, note: bytes) -> int:
    """The served checkpoint carries the log's signature and both mirror cosignatures, each
    verifying (the ML-DSA-44 one also with dilithium-py); its size."""
    _, sigs = open_note(note, [s.log_key.verifier()])
    assert len(sigs) == 1
    _, mine = open_note(note, [s.pq.verifier(), s.ed.verifier()])
    assert {x.name for x in mine} == {PQ_NAME, ED_NAME}
    cp = parse_checkpoint_text(parse_note(note).text)
    pq_line = next(x for x in mine if x.name == PQ_NAME)
    ts = int.from_bytes(pq_line.signature[:8], "big")
    assert ts > 0
    assert ML_DSA_44.verify(s.pq.public_key,
                            subtree_message(PQ_NAME, ts, ORIGIN, 0, cp.size, cp.root_hash),
                            pq_line.signature[8:])
    return cp.size


async def test_a_mirror_fed_from_a_log_serves_its_tiles_byte_for_byte(setup: Setup) -> None:
    s = setup
    assert await s.served() is None  # nothing mirrored yet: 404
    for grow in (1, 254, 1, 1, 300, 700, 0, 2):
        note = await s.grow(grow) if grow else await s.head_note()
        sigs = await s.push(note)
        assert {x.name for x in sigs} == {PQ_NAME, ED_NAME}
        served = await s.served()
        assert served is not None
        size = check_cosigned(s, served)
        assert size == parse_checkpoint_text(parse_note(note).text).size
        # The cosigned size is covered by the durable copy.
        assert s.mirror.copies[ORIGIN].size >= size
        await assert_same_tiles(s, size)
    # Beyond the mirror checkpoint: 404.
    async with s.http.get(f"{s.prefix}/tile/entries/x001/000") as r:
        assert r.status == 404


async def test_add_checkpoint_answers_as_a_witness_but_never_signs(setup: Setup) -> None:
    s = setup
    note = await s.grow(10)
    status, ctype, body = await s.post("/add-checkpoint", format_add_checkpoint(0, [], note))
    assert status == 200 and body == b""
    status, ctype, body = await s.post("/add-checkpoint", format_add_checkpoint(0, [], note))
    assert status == 409 and ctype == "text/x.tlog.size" and body == b"10\n"
    # Pending is not mirrored: nothing is served until the entries are there.
    assert await s.served() is None
    # Unknown origin 404, untrusted signature 403, old above size 400.
    other = sign_note(Checkpoint("other.test/log", 1, b"\x01" * 32).text(),
                      Ed25519Signer.generate("other.test/log"))
    assert (await s.post("/add-checkpoint", format_add_checkpoint(0, [], other)))[0] == 404
    stranger = sign_note(parse_note(note).text, Ed25519Signer.generate(ORIGIN))
    assert (await s.post("/add-checkpoint", format_add_checkpoint(0, [], stranger)))[0] == 403
    assert (await s.post("/add-checkpoint", format_add_checkpoint(11, [], note)))[0] == 400


async def test_add_entries_before_any_checkpoint_is_422(setup: Setup) -> None:
    s = setup
    await s.grow(3)
    body = format_add_entries_header(AddEntriesHeader(ORIGIN, 0, 3))
    status, _, _ = await s.post("/add-entries", body)
    assert status == 422
    status, _, _ = await s.post("/add-entries",
                                format_add_entries_header(AddEntriesHeader("nope.test/x", 0, 3)))
    assert status == 404


async def packages(s: Setup, start: int, end: int, count: int | None = None) -> list[bytes]:
    source = LogReaderSource(s.log.reader)
    out = []
    n = package_count(start, end) if count is None else count
    for i in range(n):
        p = package_at(start, end, i)
        out.append(format_package(await source.entries(p.start, p.end),
                                  await source.subtree_proof(p.base, p.end, end)))
    return out


async def test_a_hostile_client_gets_the_specs_status_and_changes_nothing(setup: Setup
                                                                           ) -> None:
    s = setup
    note = await s.grow(300)
    await s.push(note)  # mirrored at 300
    note2 = await s.grow(600)  # log at 900
    status, _, _ = await s.post("/add-checkpoint", format_add_checkpoint(
        300, await s.log.reader.consistency_proof(300, 900), note2))
    assert status == 200
    before = await s.snapshot()
    assert before[:2] == (900, 300)
    header = format_add_entries_header(AddEntriesHeader(ORIGIN, 300, 900))
    good = await packages(s, 300, 900)

    async def refused(body: bytes, status: int, headers: dict[str, str] | None = None, *,
                      path: str = "/add-entries") -> bytes:
        got, ctype, answer = await s.post(path, body, headers)
        assert got == status, answer
        assert await s.snapshot() == before
        if status == 409:
            assert ctype == MIRROR_INFO_CONTENT_TYPE
        return answer

    # Wrong entries: an entry changed, its package's proof no longer leads to the root.
    entries = await s.log.reader.entries(300, 512)
    entries[5] = b"forged"
    proof = await LogReaderSource(s.log.reader).subtree_proof(256, 512, 900)
    await refused(header + format_package(entries, proof), 422)
    # A bad proof: one hash flipped.
    bad = bytearray(good[0])
    bad[-1] ^= 1
    await refused(header + bytes(bad), 422)
    # Malformed: a truncated header, a truncated first package, num_hashes above 63.
    await refused(header[:-3], 400)
    await refused(header + good[0][:-5], 400)
    too_long = format_package(await s.log.reader.entries(300, 512), [])[:-1] + bytes([64])
    await refused(header + too_long + bytes(32 * 64), 400)
    await refused(format_add_entries_header(AddEntriesHeader(ORIGIN, 901, 900)), 400)
    await refused(header + good[0], 400, {"Content-Type": "text/plain"})
    # 409s: unknown upload_end, upload_start past the next entry, too many resent entries,
    # upload_end below the mirror checkpoint.
    info = parse_mirror_info(await refused(
        format_add_entries_header(AddEntriesHeader(ORIGIN, 300, 899)), 409))
    assert (info.tree_size, info.next_entry) == (900, 300)
    info = parse_mirror_info(await refused(
        format_add_entries_header(AddEntriesHeader(ORIGIN, 301, 900)), 409))
    assert (info.tree_size, info.next_entry) == (900, 300)
    await refused(format_add_entries_header(AddEntriesHeader(ORIGIN, 0, 900)), 409)
    # A forked checkpoint: signed by the log's key, inconsistent with the pending one.
    fork = sign_note(Checkpoint(ORIGIN, 1000, b"\x07" * 32).text(), s.log_key)
    status, _, _ = await s.post("/add-checkpoint", format_add_checkpoint(
        900, await s.log.reader.consistency_proof(300, 900), fork))
    assert status == 422
    same_size = sign_note(Checkpoint(ORIGIN, 900, b"\x07" * 32).text(), s.log_key)
    status, _, _ = await s.post("/add-checkpoint", format_add_checkpoint(900, [], same_size))
    assert status == 422
    assert await s.snapshot() == before
    # An oversized body (over the mirror's read bound) before a package completes: 400.
    huge = format_package([b"\xff" * 65535] * 212, [])
    await refused(header + huge, 400)
    # A gzip bomb: 256 MiB of 0xff inflate to entries of 65,535 bytes past the read bound;
    # 64 MiB of zeros to empty entries whose proof fails.
    bomb = gzip.compress(header + b"\xff" * (256 << 20), compresslevel=1)
    assert len(bomb) < 2 << 20
    await refused(bomb, 400, {"Content-Encoding": "gzip"})
    zeros = gzip.compress(header + bytes(64 << 20), compresslevel=1)
    await refused(zeros, 422, {"Content-Encoding": "gzip"})
    # Not even gzip: 400 (a gzip header then garbage; a body that is not gzip at all, even the
    # good packages uncompressed; the same for deflate), as the spec's malformed body.
    await refused(b"\x1f\x8b\x08\x00garbage", 400, {"Content-Encoding": "gzip"})
    await refused(header + good[0], 400, {"Content-Encoding": "gzip"})
    await refused(b"hello, not gzip", 400, {"Content-Encoding": "gzip"})
    await refused(header + good[0], 400, {"Content-Encoding": "deflate"})
    for path in ("/add-checkpoint", "/sign-subtree"):  # the other POSTs too
        await refused(b"hello, not gzip", 400, {"Content-Encoding": "gzip"}, path=path)

    # A prefix: one good package then garbage is a 202 with the advanced next entry.
    status, ctype, answer = await s.post("/add-entries", header + good[0] + b"\x00\x05ab")
    assert status == 202 and ctype == MIRROR_INFO_CONTENT_TYPE
    info = parse_mirror_info(answer)
    assert (info.tree_size, info.next_entry) == (900, 512)
    assert s.mirror.copies[ORIGIN].size == 512
    assert await s.served() == before[2]  # not cosigned before it is complete
    # The rest, gzip-compressed, in one request: 200 with the cosignatures.
    rest = format_add_entries_header(AddEntriesHeader(ORIGIN, 512, 900))
    body = gzip.compress(rest + b"".join(await packages(s, 512, 900)))
    status, _, answer = await s.post("/add-entries", body, {"Content-Encoding": "gzip"})
    assert status == 200, answer
    served = await s.served()
    assert served is not None and check_cosigned(s, served) == 900
    await assert_same_tiles(s, 900)
    # upload_end below the mirror checkpoint (300 is a kept pending size): 409.
    status, _, answer = await s.post(
        "/add-entries", format_add_entries_header(AddEntriesHeader(ORIGIN, 300, 300)))
    assert status == 409
    info = parse_mirror_info(answer)  # not a valid upload_end: the pending size instead
    assert (info.tree_size, info.next_entry) == (900, 900)
    # An empty upload at the mirror checkpoint's size answers its cosignatures again.
    status, _, answer = await s.post(
        "/add-entries", format_add_entries_header(AddEntriesHeader(ORIGIN, 900, 900)))
    assert status == 200 and answer.count("\u2014".encode()) == 2


async def test_sign_subtree_needs_the_mirrors_own_cosignature(setup: Setup) -> None:
    s = setup
    await s.push(await s.grow(600))
    note = await s.served()
    assert note is not None
    cp = parse_checkpoint_text(parse_note(note).text)
    source = LogReaderSource(s.log.reader)
    subtree = (await s.log.reader.hashes([(8, 1)], 600))[(8, 1)]
    proof = await source.subtree_proof(256, 512, 600)
    status, _, body = await s.post("/sign-subtree", format_sign_subtree(256, 512, subtree,
                                                                        proof, note))
    assert status == 200, body
    line = parse_note(parse_note(note).text.encode() + b"\n" + body).signatures[0]
    assert line.name == PQ_NAME and line.signature[:8] == bytes(8)
    assert ML_DSA_44.verify(s.pq.public_key,
                            subtree_message(PQ_NAME, 0, ORIGIN, 256, 512, subtree),
                            line.signature[8:])
    only_log = format_note(Note(cp.text(), (open_note(note, [s.log_key.verifier()])[1][0],)))
    status, _, _ = await s.post("/sign-subtree", format_sign_subtree(256, 512, subtree,
                                                                     proof, only_log))
    assert status == 403


async def test_the_client_reports_a_mirror_that_refuses(setup: Setup) -> None:
    s = setup
    note = await s.grow(5)
    bogus = MirrorClient(s.url, [s.pq.verifier()], s.client.http)
    other = sign_note(parse_note(note).text, Ed25519Signer.generate(ORIGIN))
    with pytest.raises(MirrorRefused) as e:
        await bogus.push(other, LogReaderSource(s.log.reader))
    assert e.value.status == 403


async def test_packages_are_cut_at_multiples_of_256() -> None:
    assert package_count(5, 5) == 0
    assert [(p.base, p.start, p.end) for p in
            (package_at(300, 1000, i) for i in range(package_count(300, 1000)))] == [
        (256, 300, 512), (512, 512, 768), (768, 768, 1000)]
    assert struct.unpack(">H", format_add_entries_header(AddEntriesHeader("a", 1, 2))[:2]) == (1,)


async def test_concurrent_clients_each_get_the_cosignature(setup: Setup) -> None:
    """Two clients upload the same checkpoint at once, a package per request: each skips what
    the other stored, follows the 409s and 202s, and both end with a cosignature."""
    s = setup
    note = await s.grow(2000)
    clients = [MirrorClient(s.url, [s.pq.verifier()], s.client.http, packages_per_request=1,
                            compress=c) for c in (True, False)]
    results = await asyncio.gather(*(c.push(note, LogReaderSource(s.log.reader)) for c in clients))
    assert all(len(r) == 1 for r in results)
    served = await s.served()
    assert served is not None and check_cosigned(s, served) == 2000
    await assert_same_tiles(s, 2000)


async def test_a_log_signed_with_ml_dsa_44_only_is_mirrored(tmp_path: Path) -> None:
    """The log key may be ML-DSA-44 (``--log ORIGIN=VKEY`` with a 0x06 key)."""
    log_pq = SubtreeCosignatureSigner.generate(ORIGIN)
    mirror_key = SubtreeCosignatureSigner.generate(PQ_NAME)
    state = await MirrorState.open(tmp_path / "m.db", [mirror_key.verifier_key_text()])
    copy = await LogCopy.open(ORIGIN, MemoryStore())
    mirror = Mirror([mirror_key], {ORIGIN: [log_pq.verifier()]}, state, {ORIGIN: copy})
    entries = [b"pq entry %d" % i for i in range(3)]
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    await log.append_many(entries)
    head = await log.head(0)
    assert head is not None
    text = head.checkpoint.text()
    note = format_note(Note(text, (log_pq.cosign(text, 1_700_000_000),)))
    answer = await mirror.add_checkpoint(format_add_checkpoint(0, [], note))
    assert (answer.status, answer.body) == (200, b"")
    body = format_add_entries_header(AddEntriesHeader(ORIGIN, 0, 3)) + format_package(entries, [])
    view = memoryview(body)

    async def read(n: int) -> bytes:
        nonlocal view
        if n > len(view):
            raise BodyEnded
        out, view = bytes(view[:n]), view[n:]
        return out

    answer = await mirror.add_entries(read)
    assert answer.status == 200, answer.body
    served = (await mirror.checkpoint(origin_hash(ORIGIN))).body
    open_note(served, [log_pq.verifier()])
    open_note(served, [mirror_key.verifier()])
    await state.close()
    await log.close()


async def monitor(*argv: str) -> tuple[int, str]:
    """``ledger monitor ARGV`` in process: its exit code and what it wrote."""
    parser = argparse.ArgumentParser()
    register_monitor(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    code = await run_monitor(parser.parse_args(["monitor", *argv]), out=out, err=err)
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("given", ["both", "ed25519"])
async def test_a_mirror_keeps_each_log_line_it_can_verify(tmp_path: Path, given: str) -> None:
    """A log that signs with Ed25519 and ML-DSA-44: a mirror given both keys serves both lines,
    so a monitor trusting either key alone audits the log through it. Given one key, it can
    verify (and so serve) that line only; it cannot know the log has another key until a
    checkpoint carries it, and then says so once: the operator's fix is the missing --log."""
    ed = Ed25519Signer.generate(ORIGIN)
    pq = PostQuantumCheckpoints(SubtreeCosignatureSigner.derived_from(ed), ORIGIN,
                                min_interval=0)
    log = await Log.open(MemoryStore(), signer=ed)
    await log.append_many([b"entry %d" % i for i in range(300)])
    keys = [ed.verifier(), pq.signer.verifier()] if given == "both" else [ed.verifier()]
    mirror_key = SubtreeCosignatureSigner.generate(PQ_NAME)
    state = await MirrorState.open(tmp_path / "m.db", [mirror_key.verifier_key_text()])
    copy = await LogCopy.open(ORIGIN, MemoryStore())
    mirror = Mirror([mirror_key], {ORIGIN: keys}, state, {ORIGIN: copy})
    async with serving(create_mirror_app(mirror)) as served, aiohttp.ClientSession() as http:
        client = MirrorClient(served.url, [mirror_key.verifier()], HttpClient(http))
        head = await log.head(0)
        assert head is not None
        with capture_logs() as logs:
            for _ in range(2):
                await client.push(pq.sign(head), LogReaderSource(log.reader))
        warned = [e for e in logs if e["event"] == "log_key_not_given"]
        prefix = f"{served.url}/{origin_hash(ORIGIN)}"
        results = {}
        for name, vkey in (("ed25519", ed.verifier().vkey), ("ml-dsa-44", pq.vkey)):
            results[name] = await monitor("--log", prefix, "--vkey", vkey, "--witness",
                                          mirror_key.verifier_key_text(), "--audit",
                                          "--state", str(tmp_path / f"{name}.json"))
    if given == "both":
        assert warned == []
        for name, (code, out) in results.items():
            assert code == ExitCode.OK, (name, out)
            assert "audited 300 entries" in out, out
    else:
        assert len(warned) == 1 and warned[0]["key_id"] == f"{pq.signer.key_id:08x}", warned
        assert results["ed25519"][0] == ExitCode.OK, results["ed25519"][1]
        assert results["ml-dsa-44"][0] != ExitCode.OK
    await copy.close()
    await state.close()
    await log.close()
