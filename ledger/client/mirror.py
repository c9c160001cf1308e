"""A tlog-mirror client: push a log's checkpoint and its entries to one mirror, and get the
mirror's verified cosignature.

:meth:`MirrorClient.push` runs the spec's client side: ``add-checkpoint`` (starting from the
pending size it last learned, 0 at first, and retrying once with the size a 409 reports),
then ``add-entries``: a first request with an empty upload (``upload_start = upload_end``),
which either is answered 200 at once (the mirror has every entry) or says in its 409 where
the mirror's next entry is; then at most :data:`MAX_PACKAGES_PER_REQUEST` packages per request,
gzip-compressed, following each 202 or 409 from the next entry it reports, until the 200
with the cosignature. The entries and proofs come from a :class:`MirrorSource`;
:class:`LogReaderSource` reads them from a log's tiles (a :class:`~ledger.log.reader.LogReader`).

Every outcome other than a verified cosignature is an exception of the witness client's
hierarchy (:mod:`ledger.client.cosigner`): :class:`MirrorRefused` (a 4xx, or an answer that
does not follow the spec), :class:`MirrorUnavailable` (transport, 5xx).
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Sequence
from typing import Protocol

from ledger.client.cosigner import (
    CosignerConflict,
    CosignerEndpoint,
    CosignerError,
    CosignerRefused,
    CosignerUnavailable,
)
from ledger.client.http import HttpClient
from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.mirror_protocol import (
    MAX_PACKAGES_PER_REQUEST,
    MIRROR_INFO_CONTENT_TYPE,
    AddEntriesHeader,
    MirrorInfo,
    MirrorProtocolError,
    format_add_entries_header,
    format_package,
    package_at,
    package_count,
    parse_mirror_info,
)
from ledger.core.note import NoteError, NoteSignature, NoteVerifier, parse_note
from ledger.core.proofs import assemble, plan_coords
from ledger.core.subtree import subtree_consistency_plan
from ledger.core.witness_protocol import ProtocolError, verify_cosignatures
from ledger.log.reader import LogReader

__all__ = [
    "LogReaderSource",
    "MirrorClient",
    "MirrorError",
    "MirrorRefused",
    "MirrorSource",
    "MirrorUnavailable",
]

MirrorError = CosignerError
MirrorUnavailable = CosignerUnavailable
MirrorRefused = CosignerRefused


class MirrorSource(Protocol):
    """Where the pushed entries and proofs come from (the log's tiles, usually)."""

    async def consistency_proof(self, old: int, new: int) -> list[bytes]: ...

    async def entries(self, start: int, end: int) -> list[bytes]: ...

    async def subtree_proof(self, start: int, end: int, size: int) -> list[bytes]:
        """The subtree consistency proof of ``[start, end)`` in the tree of ``size``."""
        ...


class LogReaderSource:
    """A :class:`MirrorSource` over a log's tiles."""

    def __init__(self, reader: LogReader) -> None:
        self.reader = reader

    async def consistency_proof(self, old: int, new: int) -> list[bytes]:
        return [] if old == 0 else await self.reader.consistency_proof(old, new)

    async def entries(self, start: int, end: int) -> list[bytes]:
        return await self.reader.entries(start, end)

    async def subtree_proof(self, start: int, end: int, size: int) -> list[bytes]:
        plan = subtree_consistency_plan(start, end, size)
        return assemble(plan, await self.reader.hashes(plan_coords(plan), size))


class MirrorClient:
    """One mirror: its submission prefix URL and the verifier keys of its cosignatures."""

    def __init__(self, url: str, verifiers: Sequence[NoteVerifier], http: HttpClient, *,
                 packages_per_request: int = MAX_PACKAGES_PER_REQUEST,
                 compress: bool = True) -> None:
        self.endpoint = CosignerEndpoint(url, http, "mirror")
        self.url = self.endpoint.url
        self.http = http
        self.verifiers = list(verifiers)
        self.packages_per_request = packages_per_request
        self.compress = compress
        #: The mirror's pending size as last learned (where add-checkpoint starts).
        self.pending = 0

    async def push(self, checkpoint: bytes, source: MirrorSource) -> list[NoteSignature]:
        """Make ``checkpoint`` pending at the mirror, upload what it lacks, and return the
        mirror's verified cosignature(s) on it."""
        await self.add_checkpoint(checkpoint, source)
        return await self.add_entries(checkpoint, source)

    async def add_checkpoint(self, checkpoint: bytes, source: MirrorSource) -> int:
        """POST the checkpoint with a proof from the mirror's pending size; return the
        mirror's pending size afterwards (the checkpoint's, unless the mirror is ahead)."""
        size = parse_checkpoint_text(parse_note(checkpoint).text).size
        old = self.pending
        for _ in range(2):
            if old > size:  # the mirror already holds a larger pending checkpoint
                self.pending = old
                return old
            proof = [] if old == size else await source.consistency_proof(old, size)
            try:
                await self.endpoint.add_checkpoint(old, proof, checkpoint)
            except CosignerConflict as c:
                old = c.size
                continue
            self.pending = size
            return size
        raise self.endpoint.refused(409, f"the mirror's pending size moved again (now {old})")

    async def add_entries(self, checkpoint: bytes, source: MirrorSource
                          ) -> list[NoteSignature]:
        """Upload ``[next entry, size)`` and return the cosignature on ``checkpoint``."""
        text = parse_note(checkpoint).text
        cp = parse_checkpoint_text(text)
        end = start = cp.size
        attempts = package_count(0, end) // max(self.packages_per_request, 1) + 8
        for _ in range(attempts):
            body = await self._body(cp.origin, start, end, source)
            answer = await self.endpoint.post("/add-entries", body, self._entries_headers())
            if answer.status == 200:
                try:
                    return verify_cosignatures(text, answer.body, self.verifiers)
                except (ProtocolError, NoteError) as e:
                    raise self.endpoint.refused(200, f"no valid cosignature by the mirror: "
                                                     f"{e}") from None
            if answer.status in (202, 409) \
                    and answer.content_type == MIRROR_INFO_CONTENT_TYPE:
                info = self._info(answer.status, answer.body)
                if info.tree_size != end or info.next_entry > end:
                    raise self.endpoint.refused(
                        answer.status, f"the mirror is at pending size {info.tree_size}, next "
                                       f"entry {info.next_entry}; not a size {end} upload")
                start = info.next_entry
                continue
            raise self.endpoint.refusal(answer.status, answer.body)
        raise self.endpoint.refused(202, f"the upload to size {end} did not finish")

    async def _body(self, origin: str, start: int, end: int, source: MirrorSource) -> bytes:
        parts = [format_add_entries_header(AddEntriesHeader(origin, start, end))]
        for i in range(min(package_count(start, end), self.packages_per_request)):
            p = package_at(start, end, i)
            parts.append(format_package(await source.entries(p.start, p.end),
                                        await source.subtree_proof(p.base, p.end, end)))
        body = b"".join(parts)
        if not self.compress:
            return body
        # Megabytes to compress: in a thread, so that the event loop (a notary's receipts)
        # never waits for it.
        return await asyncio.to_thread(gzip.compress, body, compresslevel=6, mtime=0)

    def _entries_headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/octet-stream"}
        if self.compress:
            headers["Content-Encoding"] = "gzip"
        return headers

    def _info(self, status: int, body: bytes) -> MirrorInfo:
        try:
            return parse_mirror_info(body)
        except MirrorProtocolError as e:
            raise self.endpoint.refused(status, str(e)) from None
