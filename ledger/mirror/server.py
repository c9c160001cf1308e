"""The mirror HTTP service (C2SP tlog-mirror): ``POST /add-checkpoint``, ``POST /add-entries``,
``POST /sign-subtree``, and the copy of each log as tlog-tiles under ``/<origin hash>/``.

The update process is the spec's three stages, each a small durable transaction:

1. ``add-checkpoint`` is a witness's, checked in the witness's order (404, 403, 400, 409 with
   the pending size, 422), against the *pending* checkpoint, which it updates. It answers 200
   with an empty body: the mirror key never signs here.
2. ``add-entries`` reads the header, answers 404 (unknown origin), 422 (no pending checkpoint
   yet), 400 (malformed, or ``upload_start > upload_end``) or 409 (``upload_end`` neither a kept
   pending size nor the mirror checkpoint's, below the mirror checkpoint, ``upload_start`` past
   the next entry, or more than :data:`~ledger.core.mirror_protocol.MAX_EXCESS_ENTRIES` stored
   entries resent) before reading any package. Then each package, read from the stream as it
   arrives, is authenticated by its subtree consistency proof against the checkpoint at
   ``upload_end`` (else 422, and processing ends) and committed to the log copy at once.
3. Once the copy holds every entry up to ``upload_end`` (durably), the copy's root there is
   checked against the checkpoint, and the mirror checkpoint moves to it if it is not smaller,
   in one transaction that also writes the mirror's cosignatures; only then are they sent.
   A body that ends early after at least one saved package is a 202 (the mirror-info body
   says where to resume); one with no saved package, a 400.

A ``kill -9`` at any point therefore loses no cosigned entry (the copy is committed first) and
leaves nothing cosigned that is not stored. Bodies may be ``Content-Encoding: gzip`` (aiohttp
inflates them chunk by chunk as they are read); at most ``max_body`` inflated bytes are read
per request, more being treated as the body's end (the spec's prefix rule), so a gzip bomb
costs that much reading at most and stores nothing that is not proven. Bytes that do not
inflate end the body too: a 400 before any package was saved, a 202 after.

The checkpoints served carry the log signature lines the mirror verified, by the keys it was
given (``--log`` once per key): a log that signs with Ed25519 and ML-DSA-44 is mirrored with
both keys, so that monitors trusting either alone can use the mirror. A checkpoint carrying a
line in the log's name by another key is mirrored without it, and the mirror warns once.

Other answers are ``text/plain`` with a one-line reason, as the witness's.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE, leaf_hash, merkle_root
from ledger.core.mirror_protocol import (
    MAX_PROOF_HASHES,
    MIRROR_INFO_CONTENT_TYPE,
    AddEntriesHeader,
    MirrorInfo,
    MirrorProtocolError,
    Package,
    check_upload,
    format_mirror_info,
    package_at,
    package_count,
)
from ledger.core.note import NoteError, NoteSignature, NoteVerifier, open_note, parse_note
from ledger.core.proofs import ProofError
from ledger.core.subtree import verify_subtree_consistency
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tiles import TILE_WIDTH, TilePathError, parse_tile_path, tile_count
from ledger.core.witness_protocol import (
    MAX_REQUEST_SIZE,
    SIZE_CONTENT_TYPE,
    Outcome,
    ProtocolError,
    format_cosignatures,
    format_size,
    parse_add_checkpoint,
)
from ledger.mirror.copy import LogCopy
from ledger.mirror.state import MirrorState, Pending
from ledger.witness.server import (
    Answer,
    WitnessSigner,
    origin_hash,
    read_body,
    sign_subtree_answer,
)

__all__ = ["DEFAULT_MAX_BODY", "MIRROR", "BodyEnded", "Mirror", "create_mirror_app"]

_log = structlog.get_logger("ledger.mirror")

#: Inflated bytes read from one ``add-entries`` body: 32 packages of entries up to ~250 bytes
#: fit in a few MiB; larger entries simply take more requests (each answered 202).
DEFAULT_MAX_BODY = 64 * 1024 * 1024
#: How long one read of the body may wait for bytes before the body counts as ended.
READ_TIMEOUT = 60.0
#: What the mirror can inflate (tlog-mirror: SHOULD be sent with its answers).
ACCEPT_ENCODING = "gzip, deflate"

Read = Callable[[int], Awaitable[bytes]]


class BodyEnded(LedgerError):
    """The request body ended (or broke, or reached the read bound) before the bytes asked."""


class Mirror:
    """The mirror's behaviour: its keys, the logs it mirrors, their copies and its state."""

    def __init__(self, signers: Sequence[WitnessSigner],
                 logs: Mapping[str, Sequence[NoteVerifier]], state: MirrorState,
                 copies: Mapping[str, LogCopy], *, clock: Callable[[], float] = time.time,
                 max_body: int = DEFAULT_MAX_BODY) -> None:
        if not logs:
            raise ValueError("a mirror needs at least one log to mirror")
        if not signers:
            raise ValueError("a mirror needs at least one key")
        if set(copies) != set(logs):
            raise ValueError("every mirrored log needs its copy")
        self.signers = list(signers)
        self.subtree_signers = [s for s in self.signers
                                if isinstance(s, SubtreeCosignatureSigner)]
        self.own_keys = [s.verifier() for s in self.signers]
        self.own_ids = {(s.name, s.key_id) for s in self.signers}
        self.logs = {origin: list(keys) for origin, keys in logs.items()}
        self.origins = {origin_hash(origin): origin for origin in self.logs}
        self.state = state
        self.copies = dict(copies)
        self.clock = clock
        self.max_body = max_body
        self._locks: dict[str, asyncio.Lock] = {}
        self._warned_origins: set[str] = set()

    def _cosign(self, text: str) -> list[NoteSignature]:
        timestamp = int(self.clock())
        return [s.cosign(text, timestamp) for s in self.signers]

    # -- add-checkpoint ------------------------------------------------------------------------

    async def add_checkpoint(self, body: bytes) -> Answer:
        """A witness's ``add-checkpoint`` on the pending checkpoint; never raises for bad
        input, and never signs."""
        try:
            req = parse_add_checkpoint(body)
            note = parse_note(req.checkpoint)
            cp = parse_checkpoint_text(note.text)
        except (ProtocolError, NoteError) as e:
            return Answer.text(400, f"malformed request: {e}")
        verifiers = self.logs.get(cp.origin)
        if verifiers is None:
            return Answer.text(404, f"unknown log origin {cp.origin[:200]!r}")
        try:
            _, log_sigs = open_note(req.checkpoint, verifiers)
        except NoteError as e:
            return Answer.text(403, f"checkpoint is not signed by a trusted key of the log: {e}")
        self._warn_of_other_log_keys(cp.origin, note.signatures, verifiers)
        async with self._locks.setdefault(cp.origin, asyncio.Lock()):
            decision = await self.state.add_checkpoint(cp.origin, req.old, req.proof, cp,
                                                       note.text, log_sigs)
        if decision.outcome is Outcome.COSIGN:
            return Answer(200, b"", "text/plain; charset=utf-8")
        if decision.evidence:
            _log.warning("refused_signed_checkpoint", origin=cp.origin, size=cp.size,
                         old=req.old, status=decision.outcome.value, reason=decision.reason)
        if decision.outcome is Outcome.CONFLICT:
            return Answer(409, format_size(decision.known), SIZE_CONTENT_TYPE)
        return Answer.text(decision.outcome.value, decision.reason)

    def _warn_of_other_log_keys(self, origin: str, signatures: Sequence[NoteSignature],
                                verifiers: Sequence[NoteVerifier]) -> None:
        """Say once per log when a checkpoint it signed carries a line in its name by a key
        this mirror was not given. The mirror serves only the log lines it verified (an
        unverified one, which anyone may add, could break every monitor trusting that key), so
        a log that signs with two algorithms must be given with both keys, or monitors trusting
        the other key alone find nothing they trust here; only the log's checkpoints can show
        that the mirror lacks one."""
        known = {v.key_id for v in verifiers if v.name == origin}
        other = next((s for s in signatures if s.name == origin and s.key_id not in known),
                     None)
        if other is not None and origin not in self._warned_origins:
            self._warned_origins.add(origin)
            _log.warning("log_key_not_given", origin=origin, key_id=f"{other.key_id:08x}",
                         hint="its checkpoints carry a line by this key, which the mirror "
                              "cannot verify and so does not serve; if the log signs with "
                              "it, give that key too (--log ORIGIN=VKEY)")

    # -- sign-subtree --------------------------------------------------------------------------

    async def sign_subtree(self, body: bytes) -> Answer:
        """A witness's ``sign-subtree``, for checkpoints the mirror key cosigned."""
        return sign_subtree_answer(body, self.logs, self.own_keys, self.subtree_signers)

    # -- add-entries ---------------------------------------------------------------------------

    async def add_entries(self, read: Read) -> Answer:
        """Handle one ``add-entries`` body, read with ``read(n)`` (exactly ``n`` bytes, or
        :class:`BodyEnded`); never raises for bad input."""
        try:
            header = await _read_header(read)
        except BodyEnded:
            return Answer.text(400, "the body ends inside the add-entries header")
        except MirrorProtocolError as e:
            return Answer.text(400, f"malformed add-entries header: {e}")
        origin, start, end = header.origin, header.upload_start, header.upload_end
        copy = self.copies.get(origin)
        if copy is None:
            return Answer.text(404, f"unknown log origin {origin[:200]!r}")
        pending = await self.state.pending(origin)
        if not pending:
            return Answer.text(422, "no checkpoint of this log was ever added: call "
                                    "add-checkpoint first")
        mirrored = await self.state.mirrored(origin)
        known = {p.size: p for p in pending}
        if mirrored is not None:
            known.setdefault(mirrored.size, Pending(mirrored.size, mirrored.root,
                                                    mirrored.note))
        target = known.get(end)
        check = check_upload(start, end, known_end=target is not None,
                             mirror_size=0 if mirrored is None else mirrored.size,
                             next_entry=copy.size)
        if check.status == 400:
            return Answer.text(400, check.reason)
        if check.status or target is None:
            # The spec: the first line is upload_end when that was valid, else the pending size.
            valid = target is not None and (mirrored is None or end >= mirrored.size)
            return self._info(409, end if valid else pending[0].size, copy)
        saved = 0
        for i in range(package_count(start, end)):
            package = package_at(start, end, i)
            try:
                entries, proof = await _read_package(read, package)
            except (BodyEnded, MirrorProtocolError):
                break  # partial bytes after the last authenticated package are discarded
            first = await copy.leaf_hashes(package.base, package.start)
            subtree = merkle_root([*first, *map(leaf_hash, entries)])
            try:
                verify_subtree_consistency(package.base, package.end, end, proof, subtree,
                                           target.root)
            except ProofError as e:
                return Answer.text(422, f"package {i} [{package.start}, {package.end}): "
                                        f"subtree consistency proof: {e}")
            if await copy.append(package.start, entries) < package.end:
                break  # not stored (the copy would have had a hole): cannot happen, as
                # upload_start was at most the next entry and the copy only grows
            saved += 1
        if copy.size < end:
            if saved:
                return self._info(202, end, copy)
            return Answer.text(400, "the body holds no complete entry package")
        root = await copy.root_at(end)
        if root != target.root:  # cannot happen while every package is proven: refuse anyway
            _log.error("copy_root_mismatch", origin=origin, size=end)
            return self._info(409, pending[0].size, copy)
        _, sigs = await self.state.commit(origin, target, self._cosign,
                                          self.own_ids)
        if not sigs:
            return self._info(409, pending[0].size, copy)
        _log.debug("mirrored", origin=origin, size=end)
        return Answer(200, format_cosignatures(sigs), "text/plain; charset=utf-8")

    def _info(self, status: int, tree_size: int, copy: LogCopy) -> Answer:
        return Answer(status, format_mirror_info(MirrorInfo(tree_size, copy.size)),
                      MIRROR_INFO_CONTENT_TYPE)

    # -- monitoring ----------------------------------------------------------------------------

    async def checkpoint(self, hashed_origin: str) -> Answer:
        """The mirror checkpoint, with the log's signatures and the mirror's cosignatures."""
        origin = self.origins.get(hashed_origin)
        mirrored = None if origin is None else await self.state.mirrored(origin)
        if mirrored is None:
            return Answer.text(404, "this mirror holds no checkpoint of that log")
        return Answer(200, mirrored.note, "text/plain; charset=utf-8")

    async def tile(self, hashed_origin: str, path: str) -> Answer:
        """A tile or entry bundle of the copy within the mirror checkpoint, byte for byte the
        log's: full or partial, it never changes (a partial one is a prefix of its tile)."""
        try:
            tile = parse_tile_path(path)
        except TilePathError as e:
            return Answer.text(400, str(e))
        origin = self.origins.get(hashed_origin)
        mirrored = None if origin is None else await self.state.mirrored(origin)
        if origin is None or mirrored is None:
            return Answer.text(404, "this mirror holds no checkpoint of that log")
        if tile.index * TILE_WIDTH + tile.width > tile_count(mirrored.size, tile.level):
            return Answer.text(404, f"{path} is beyond the mirror checkpoint's size "
                                    f"{mirrored.size}")
        data = await self.copies[origin].tile(tile.level, tile.index, tile.width)
        if data is None:
            raise RuntimeError(f"{path} is within the mirror checkpoint but not in the copy")
        return Answer(200, data, "application/octet-stream")


async def _read_header(read: Read) -> AddEntriesHeader:
    (n,) = struct.unpack(">H", await read(2))
    if n == 0:
        raise MirrorProtocolError("the origin is empty")
    try:
        origin = (await read(n)).decode("utf-8")
    except UnicodeDecodeError:
        raise MirrorProtocolError("the origin is not UTF-8") from None
    start, end, ticket_size = struct.unpack(">QQH", await read(18))
    ticket = await read(ticket_size) if ticket_size else b""
    return AddEntriesHeader(origin, start, end, ticket)


async def _read_package(read: Read, package: Package) -> tuple[list[bytes], list[bytes]]:
    entries = []
    for _ in range(package.end - package.start):
        (n,) = struct.unpack(">H", await read(2))
        entries.append(await read(n) if n else b"")
    count = (await read(1))[0]
    if count > MAX_PROOF_HASHES:
        raise MirrorProtocolError(f"num_hashes {count} is above {MAX_PROOF_HASHES}")
    raw = await read(count * HASH_SIZE) if count else b""
    return entries, [raw[i : i + HASH_SIZE] for i in range(0, len(raw), HASH_SIZE)]


MIRROR = web.AppKey("ledger.mirror", Mirror)


def _reader(request: web.Request, limit: int) -> Read:
    """``read(n)`` over the (inflated) request stream, within ``limit`` bytes in all."""
    left = limit

    async def read(n: int) -> bytes:
        nonlocal left
        if n > left:
            left = 0
            raise BodyEnded
        left -= n
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                return await request.content.readexactly(n)
        except (asyncio.IncompleteReadError, HttpProcessingError, web.RequestPayloadError,
                ConnectionError, TimeoutError) as e:
            # RequestPayloadError: bytes that do not inflate under the Content-Encoding
            # declared (a body labelled gzip that is not) end the body there, as a break would.
            raise BodyEnded from e

    return read


async def _posted(request: web.Request,
                  handle: Callable[[Mirror, bytes], Awaitable[Answer]]) -> web.Response:
    """A witness-style POST: the readable body (see :func:`read_body`) handed to ``handle``."""
    body = await read_body(request)
    if isinstance(body, Answer):
        return _response(body)
    return _response(await handle(request.app[MIRROR], body))


async def _add_checkpoint(request: web.Request) -> web.Response:
    return await _posted(request, Mirror.add_checkpoint)


async def _sign_subtree(request: web.Request) -> web.Response:
    return await _posted(request, Mirror.sign_subtree)


async def _add_entries(request: web.Request) -> web.Response:
    mirror = request.app[MIRROR]
    if request.content_type != "application/octet-stream":
        answer = Answer.text(400, "add-entries wants Content-Type: application/octet-stream")
    else:
        answer = await mirror.add_entries(_reader(request, mirror.max_body))
    resp = _response(answer)
    resp.headers["Accept-Encoding"] = ACCEPT_ENCODING
    return resp


async def _checkpoint(request: web.Request) -> web.Response:
    answer = await request.app[MIRROR].checkpoint(request.match_info["origin_hash"])
    resp = _response(answer)
    if answer.status == 200:
        resp.headers["Cache-Control"] = "public, max-age=2"
    return resp


async def _tile(request: web.Request) -> web.Response:
    path = "tile/" + request.match_info["path"]
    answer = await request.app[MIRROR].tile(request.match_info["origin_hash"], path)
    resp = _response(answer)
    if answer.status == 200:  # tlog-tiles: every tile path is immutable, partial ones too
        resp.headers["Cache-Control"] = "public, max-age=31536000, immutable"
        if path.startswith("tile/entries/"):
            resp.enable_compression()  # tlog-tiles: entry bundles SHOULD be compressed
    return resp


def _response(answer: Answer) -> web.Response:
    resp = web.Response(status=answer.status, body=answer.body)
    resp.headers["Content-Type"] = answer.content_type
    resp.headers["Cache-Control"] = "no-store"
    return resp


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def create_mirror_app(mirror: Mirror) -> web.Application:
    """The aiohttp application of one mirror: submission and monitoring prefixes are its root.

    ``POST /sign-subtree`` is there only when the mirror holds a key that can sign subtrees.
    """
    app = web.Application(client_max_size=MAX_REQUEST_SIZE)
    app[MIRROR] = mirror
    app.router.add_post("/add-checkpoint", _add_checkpoint)
    app.router.add_post("/add-entries", _add_entries)
    if mirror.subtree_signers:
        app.router.add_post("/sign-subtree", _sign_subtree)
    app.router.add_get(r"/{origin_hash:[0-9a-f]{64}}/checkpoint", _checkpoint)
    app.router.add_get(r"/{origin_hash:[0-9a-f]{64}}/tile/{path:.+}", _tile)
    app.router.add_get("/healthz", _healthz)
    return app
