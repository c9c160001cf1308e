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
   With a bucket (``--publish``, :mod:`ledger.mirror.bucket`), its tiles for that size are
   stored there first and the bucket's checkpoint after the commit, before the answer; a
   bucket that fails makes it a 503 with nothing cosigned.
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

``add-checkpoint`` and ``sign-subtree`` are the witness's
(:class:`~ledger.cosigner.cosigner.Cosigner`, over :class:`~ledger.mirror.state.MirrorState`).
Other answers are ``text/plain`` with a one-line reason, as the witness's.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

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
from ledger.core.note import NoteSignature, NoteVerifier
from ledger.core.proofs import ProofError
from ledger.core.subtree import verify_subtree_consistency
from ledger.core.tiles import TILE_WIDTH, TilePathError, parse_tile_path, tile_count
from ledger.core.witness_protocol import format_cosignatures
from ledger.cosigner.app import cosigner_app, response
from ledger.cosigner.cosigner import Cosigner, CosignerAnswer, WitnessSigner
from ledger.mirror.bucket import BucketStopped, BucketUnavailable, MirrorBucket
from ledger.mirror.copy import LogCopy
from ledger.mirror.state import MirrorState, PendingCheckpoint

__all__ = ["DEFAULT_MAX_BODY", "MIRROR", "BodyEnded", "Mirror", "create_mirror_app"]

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


@dataclass(frozen=True)
class _Upload:
    """An ``add-entries`` request that passed the checks made before any package is read."""

    origin: str
    start: int
    end: int
    copy: LogCopy
    #: The checkpoint at ``end`` the packages are proven against.
    target: PendingCheckpoint
    #: The current pending size (the first line of a 409).
    pending_size: int


class Mirror(Cosigner):
    """The mirror's behaviour: its keys, the logs it mirrors, their copies and its state."""

    nothing_served = "this mirror holds no checkpoint of that log"

    def __init__(self, signers: Sequence[WitnessSigner],
                 logs: Mapping[str, Sequence[NoteVerifier]], state: MirrorState,
                 copies: Mapping[str, LogCopy], *, clock: Callable[[], float] = time.time,
                 max_body: int = DEFAULT_MAX_BODY, bucket: MirrorBucket | None = None
                 ) -> None:
        super().__init__(signers, logs, state, role="mirror", clock=clock)
        if set(copies) != set(logs):
            raise ValueError("every mirrored log needs its copy")
        self.state: MirrorState = state
        self.own_ids = {(s.name, s.key_id) for s in self.signers}
        self.copies = dict(copies)
        self.max_body = max_body
        #: Where the copies are published too (``--publish``): cosigned only once stored.
        self.bucket = bucket
        self._warned_origins: set[str] = set()

    def _signed_by_log(self, origin: str, signatures: Sequence[NoteSignature],
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
            self._log.warning("log_key_not_given", origin=origin, key_id=f"{other.key_id:08x}",
                              hint="its checkpoints carry a line by this key, which the mirror "
                                   "cannot verify and so does not serve; if the log signs "
                                   "with it, give that key too (--log ORIGIN=VKEY)")

    # -- add-entries ---------------------------------------------------------------------------

    async def add_entries(self, read: Read) -> CosignerAnswer:
        """Handle one ``add-entries`` body, read with ``read(n)`` (exactly ``n`` bytes, or
        :class:`BodyEnded`); never raises for bad input. The spec's steps, in order."""
        header = await _read_header(read)
        if isinstance(header, CosignerAnswer):
            return header
        upload = await self._check_upload(header)
        if isinstance(upload, CosignerAnswer):
            return upload
        saved = await self._store_packages(read, upload)
        if isinstance(saved, CosignerAnswer):
            return saved
        return await self._sign(upload, saved)

    async def _check_upload(self, header: AddEntriesHeader) -> _Upload | CosignerAnswer:
        """The header against the state, before any package is read: the origin (404), a
        pending checkpoint (422), then :func:`~ledger.core.mirror_protocol.check_upload`."""
        origin, start, end = header.origin, header.upload_start, header.upload_end
        copy = self.copies.get(origin)
        if copy is None:
            return CosignerAnswer.text(404, f"unknown log origin {origin[:200]!r}")
        pending = await self.state.pending(origin)
        if not pending:
            return CosignerAnswer.text(422, "no checkpoint of this log was ever added: call "
                                            "add-checkpoint first")
        mirrored = await self.state.mirrored(origin)
        known = {p.size: p for p in pending}
        if mirrored is not None:
            known.setdefault(mirrored.size, PendingCheckpoint(mirrored.size, mirrored.root,
                                                              mirrored.note))
        target = known.get(end)
        check = check_upload(start, end, known_end=target is not None,
                             mirror_size=0 if mirrored is None else mirrored.size,
                             next_entry=copy.size)
        if check.status == 400:
            return CosignerAnswer.text(400, check.reason)
        if check.status or target is None:
            # The spec: the first line is upload_end when that was valid, else the pending size.
            valid = target is not None and (mirrored is None or end >= mirrored.size)
            return _info(409, end if valid else pending[0].size, copy)
        return _Upload(origin, start, end, copy, target, pending[0].size)

    async def _store_packages(self, read: Read, upload: _Upload) -> int | CosignerAnswer:
        """Read, authenticate and commit each package to the copy as it arrives; return how
        many were saved (the body may end early), or the 422 of one whose proof fails."""
        saved = 0
        for i in range(package_count(upload.start, upload.end)):
            package = package_at(upload.start, upload.end, i)
            try:
                entries, proof = await _read_package(read, package)
            except (BodyEnded, MirrorProtocolError):
                break  # partial bytes after the last authenticated package are discarded
            first = await upload.copy.leaf_hashes(package.base, package.start)
            subtree = merkle_root([*first, *map(leaf_hash, entries)])
            try:
                verify_subtree_consistency(package.base, package.end, upload.end, proof,
                                           subtree, upload.target.root)
            except ProofError as e:
                return CosignerAnswer.text(422, f"package {i} [{package.start}, {package.end}): "
                                        f"subtree consistency proof: {e}")
            if await upload.copy.append(package.start, entries) < package.end:
                break  # not stored (the copy would have had a hole): cannot happen, as
                # upload_start was at most the next entry and the copy only grows
            saved += 1
        return saved

    async def _sign(self, upload: _Upload, saved: int) -> CosignerAnswer:
        """Once the copy holds every entry up to ``upload_end``, move the mirror checkpoint
        there and answer with the cosignatures (only after that is durable); else say where
        to resume (202), or that nothing was saved (400)."""
        origin, end, copy = upload.origin, upload.end, upload.copy
        if copy.size < end:
            if saved:
                return _info(202, end, copy)
            return CosignerAnswer.text(400, "the body holds no complete entry package")
        root = await copy.root_at(end)
        if root != upload.target.root:  # cannot happen while every package is proven
            self._log.error("copy_root_mismatch", origin=origin, size=end)
            return _info(409, upload.pending_size, copy)
        if self.bucket is None:
            sigs = await self._commit(upload)
        else:
            try:
                async with self.bucket.lock(origin):
                    await self.bucket.store_tiles(origin, copy, end)
                    sigs = await self._commit(upload)
            except BucketUnavailable as e:
                return CosignerAnswer.text(503, _bucket_refusal(e))
        if not sigs:
            return _info(409, upload.pending_size, copy)
        self._log.debug("mirrored", origin=origin, size=end)
        return CosignerAnswer(200, format_cosignatures(sigs), "text/plain; charset=utf-8")

    async def _commit(self, upload: _Upload) -> list[NoteSignature]:
        """Move the mirror checkpoint to ``upload_end`` (the copy holds it, and the bucket if
        there is one); its cosignatures, once that and the bucket's checkpoint are stored."""
        mirrored, sigs = await self.state.commit(upload.origin, upload.target, self._cosign,
                                                 self.own_ids)
        if sigs and self.bucket is not None and mirrored is not None:
            # Cosigned durably already; a retry after a failure here finds it and sends it.
            await self.bucket.store_checkpoint(upload.origin, mirrored.size, mirrored.note)
        return sigs

    def health(self) -> str | None:
        return None if self.bucket is None else self.bucket.problem()

    # -- monitoring ----------------------------------------------------------------------------

    async def tile(self, hashed_origin: str, path: str) -> CosignerAnswer:
        """A tile or entry bundle of the copy within the mirror checkpoint, byte for byte the
        log's: full or partial, it never changes (a partial one is a prefix of its tile)."""
        try:
            tile = parse_tile_path(path)
        except TilePathError as e:
            return CosignerAnswer.text(400, str(e))
        origin = self.origins.get(hashed_origin)
        mirrored = None if origin is None else await self.state.mirrored(origin)
        if origin is None or mirrored is None:
            return CosignerAnswer.text(404, self.nothing_served)
        if tile.index * TILE_WIDTH + tile.width > tile_count(mirrored.size, tile.level):
            return CosignerAnswer.text(404, f"{path} is beyond the mirror checkpoint's size "
                                            f"{mirrored.size}")
        data = await self.copies[origin].tile(tile.level, tile.index, tile.width)
        if data is None:
            raise RuntimeError(f"{path} is within the mirror checkpoint but not in the copy")
        return CosignerAnswer(200, data, "application/octet-stream")


def _bucket_refusal(error: BucketUnavailable) -> str:
    """The 503's reason: the kind of failure, never the bucket's address or the error text."""
    if isinstance(error, BucketStopped):
        return ("the mirror's bucket holds other bytes where this log's copy goes; nothing "
                "more is cosigned for it until an operator looks")
    return "the mirror's bucket did not store this size; nothing was cosigned: retry later"


def _info(status: int, tree_size: int, copy: LogCopy) -> CosignerAnswer:
    return CosignerAnswer(status, format_mirror_info(MirrorInfo(tree_size, copy.size)),
                          MIRROR_INFO_CONTENT_TYPE)


async def _read_header(read: Read) -> AddEntriesHeader | CosignerAnswer:
    """The ``add-entries`` header, or the 400 of a body that does not hold one."""
    try:
        (n,) = struct.unpack(">H", await read(2))
        if n == 0:
            raise MirrorProtocolError("the origin is empty")
        try:
            origin = (await read(n)).decode("utf-8")
        except UnicodeDecodeError:
            raise MirrorProtocolError("the origin is not UTF-8") from None
        start, end, ticket_size = struct.unpack(">QQH", await read(18))
        ticket = await read(ticket_size) if ticket_size else b""
    except BodyEnded:
        return CosignerAnswer.text(400, "the body ends inside the add-entries header")
    except MirrorProtocolError as e:
        return CosignerAnswer.text(400, f"malformed add-entries header: {e}")
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


async def _add_entries(request: web.Request) -> web.Response:
    mirror = request.app[MIRROR]
    if request.content_type != "application/octet-stream":
        answer = CosignerAnswer.text(400, "add-entries wants Content-Type: "
                                          "application/octet-stream")
    else:
        answer = await mirror.add_entries(_reader(request, mirror.max_body))
    resp = response(answer)
    resp.headers["Accept-Encoding"] = ACCEPT_ENCODING
    return resp


async def _tile(request: web.Request) -> web.Response:
    path = "tile/" + request.match_info["path"]
    answer = await request.app[MIRROR].tile(request.match_info["origin_hash"], path)
    resp = response(answer)
    if answer.status == 200:  # tlog-tiles: every tile path is immutable, partial ones too
        resp.headers["Cache-Control"] = "public, max-age=31536000, immutable"
        if path.startswith("tile/entries/"):
            resp.enable_compression()  # tlog-tiles: entry bundles SHOULD be compressed
    return resp


def create_mirror_app(mirror: Mirror) -> web.Application:
    """The aiohttp application of one mirror: submission and monitoring prefixes are its root.

    ``POST /sign-subtree`` is there only when the mirror holds a key that can sign subtrees.
    """
    app = cosigner_app(mirror, checkpoint_cache="public, max-age=2")
    app[MIRROR] = mirror
    app.router.add_post("/add-entries", _add_entries)
    app.router.add_get(r"/{origin_hash:[0-9a-f]{64}}/tile/{path:.+}", _tile)
    return app
