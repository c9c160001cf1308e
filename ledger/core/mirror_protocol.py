"""C2SP tlog-mirror ``add-entries``: the binary request, its entry packages and the mirror-info
answer, and the checks a mirror makes before it reads any package.

Pure code (no I/O, no clock) shared by the mirror server, the mirror client and the tests, so
both ends agree on every byte (https://c2sp.org/tlog-mirror):

- request body: ``uint16`` origin length, the origin, ``uint64`` upload_start, ``uint64``
  upload_end, ``uint16`` ticket length, the ticket, then a prefix of the *canonical sequence*
  of entry packages (all integers big-endian);
- the canonical sequence of ``[upload_start, upload_end)`` cuts the interval at multiples of 256;
  package ``i`` holds the entries of ``[start, end)`` (each with a ``uint16`` length), then one
  byte ``num_hashes`` (at most 63) and that many hashes: the subtree consistency proof of the
  subtree ``[base, end)`` (``base`` the multiple of 256 the package starts from) against the
  checkpoint of size ``upload_end``;
- 409 and 202 bodies (``text/x.tlog.mirror-info``): a valid pending checkpoint's size, the
  mirror's next entry, and a ticket in base64, each line ending in a newline.
"""

from __future__ import annotations

import base64
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.core.errors import LedgerError
from ledger.core.hashing import HASH_SIZE
from ledger.core.note import NoteError, strict_b64decode
from ledger.core.tiles import MAX_ENTRY_SIZE, MAX_TREE_SIZE, TILE_WIDTH

__all__ = [
    "MAX_EXCESS_ENTRIES",
    "MAX_PACKAGES_PER_REQUEST",
    "MAX_PROOF_HASHES",
    "MIRROR_INFO_CONTENT_TYPE",
    "PACKAGE_WIDTH",
    "AddEntriesHeader",
    "MirrorInfo",
    "MirrorProtocolError",
    "Package",
    "UploadCheck",
    "check_upload",
    "format_add_entries_header",
    "format_mirror_info",
    "format_package",
    "package_at",
    "package_count",
    "parse_mirror_info",
]

#: Packages are cut at multiples of 256, the width of an entry bundle.
PACKAGE_WIDTH = TILE_WIDTH
#: ``num_hashes`` MUST be at most 63.
MAX_PROOF_HASHES = 63
#: What a client SHOULD send at most per request (8,192 entries).
MAX_PACKAGES_PER_REQUEST = 32
#: Media type of 409 and 202 bodies.
MIRROR_INFO_CONTENT_TYPE = "text/x.tlog.mirror-info"
#: Entries already stored that a request may carry again (``excess_entries``): one package's
#: worth, what a client resuming inside a bundle resends. More is a 409 that tells the client
#: where to start, rather than work (reading and hashing) that stores nothing.
MAX_EXCESS_ENTRIES = PACKAGE_WIDTH

_INFO = re.compile(rb"(0|[1-9][0-9]{0,19})\n(0|[1-9][0-9]{0,19})\n([A-Za-z0-9+/=]*)\n")


class MirrorProtocolError(LedgerError, ValueError):
    """A request or answer not in the exact form the spec gives."""


@dataclass(frozen=True)
class AddEntriesHeader:
    """The fixed fields that open an ``add-entries`` body."""

    origin: str
    upload_start: int
    upload_end: int
    ticket: bytes = b""


def format_add_entries_header(header: AddEntriesHeader) -> bytes:
    """The header bytes (the packages follow)."""
    origin = header.origin.encode("utf-8")
    if not 0 < len(origin) <= 0xFFFF:
        raise MirrorProtocolError("the origin must be 1 to 65,535 bytes")
    if len(header.ticket) > 0xFFFF:
        raise MirrorProtocolError("a ticket is at most 65,535 bytes")
    for what, v in (("upload_start", header.upload_start), ("upload_end", header.upload_end)):
        if not 0 <= v <= MAX_TREE_SIZE:
            raise MirrorProtocolError(f"{what} {v} is not a uint64")
    return b"".join([struct.pack(">H", len(origin)), origin,
                     struct.pack(">QQH", header.upload_start, header.upload_end,
                                 len(header.ticket)), header.ticket])


@dataclass(frozen=True)
class Package:
    """Package ``index`` of a canonical sequence: entries ``[start, end)``, proven as part of
    the subtree ``[base, end)``."""

    index: int
    base: int
    start: int
    end: int


def package_count(upload_start: int, upload_end: int) -> int:
    """How many packages the canonical sequence of ``[upload_start, upload_end)`` holds."""
    if upload_start >= upload_end:
        return 0
    rounded_start = upload_start - upload_start % PACKAGE_WIDTH
    rounded_end = -(-upload_end // PACKAGE_WIDTH) * PACKAGE_WIDTH
    return (rounded_end - rounded_start) // PACKAGE_WIDTH


def package_at(upload_start: int, upload_end: int, index: int) -> Package:
    """Package ``index`` of the canonical sequence, as the spec defines its bounds."""
    if not 0 <= index < package_count(upload_start, upload_end):
        raise MirrorProtocolError(f"package {index} is not in the canonical sequence")
    base = upload_start - upload_start % PACKAGE_WIDTH + index * PACKAGE_WIDTH
    return Package(index, base, max(upload_start, base), min(upload_end, base + PACKAGE_WIDTH))


def format_package(entries: Sequence[bytes], proof: Sequence[bytes]) -> bytes:
    """One package: length-prefixed entries, ``num_hashes``, the proof hashes."""
    if len(proof) > MAX_PROOF_HASHES:
        raise MirrorProtocolError(f"a package proof has at most {MAX_PROOF_HASHES} hashes")
    out = []
    for e in entries:
        if len(e) > MAX_ENTRY_SIZE:
            raise MirrorProtocolError(f"an entry of {len(e)} bytes does not fit a uint16")
        out += [struct.pack(">H", len(e)), e]
    for h in proof:
        if len(h) != HASH_SIZE:
            raise MirrorProtocolError(f"proof hash of {len(h)} bytes, want {HASH_SIZE}")
    return b"".join([*out, bytes([len(proof)]), *proof])


@dataclass(frozen=True)
class MirrorInfo:
    """A 409 or 202 body: a valid pending size, the next entry, an opaque ticket."""

    tree_size: int
    next_entry: int
    ticket: bytes = b""


def format_mirror_info(info: MirrorInfo) -> bytes:
    return b"%d\n%d\n%s\n" % (info.tree_size, info.next_entry, base64.b64encode(info.ticket))


def parse_mirror_info(body: bytes) -> MirrorInfo:
    """Read a mirror-info body strictly (the client resumes from it)."""
    m = _INFO.fullmatch(body)
    if m is None:
        raise MirrorProtocolError(f"not a {MIRROR_INFO_CONTENT_TYPE} body: {body[:60]!r}")
    size, nxt = int(m.group(1)), int(m.group(2))
    if size > MAX_TREE_SIZE or nxt > MAX_TREE_SIZE:
        raise MirrorProtocolError("mirror-info sizes must fit in 64 bits")
    try:
        ticket = strict_b64decode(m.group(3).decode("ascii"), "ticket")
    except NoteError as e:
        raise MirrorProtocolError(str(e)) from None
    return MirrorInfo(size, nxt, ticket)


@dataclass(frozen=True)
class UploadCheck:
    """The outcome of :func:`check_upload`: ``status`` 0 when the packages may be read, else
    409 with a reason (the answer's body is then a :class:`MirrorInfo`)."""

    status: int
    reason: str = ""


def check_upload(upload_start: int, upload_end: int, *, known_end: bool, mirror_size: int,
                 next_entry: int) -> UploadCheck:
    """The spec's checks of ``upload_start`` and ``upload_end``, made before the body is read.

    ``known_end`` says whether ``upload_end`` is the size of a known (current or recent)
    pending checkpoint or of the mirror checkpoint. A request whose ``upload_start`` is above
    ``upload_end`` cannot name a canonical sequence: that is a malformed header (400).
    """
    if upload_start > upload_end:
        return UploadCheck(400, f"upload_start {upload_start} is above upload_end {upload_end}")
    if not known_end:
        return UploadCheck(409, f"upload_end {upload_end} is not a known pending checkpoint "
                                "size")
    if upload_end < mirror_size:
        return UploadCheck(409, f"upload_end {upload_end} is below the mirror checkpoint's "
                                f"size {mirror_size}")
    if upload_start > next_entry:
        return UploadCheck(409, f"upload_start {upload_start} is above the next entry "
                                f"{next_entry}")
    excess = min(upload_end, next_entry) - upload_start
    if excess > MAX_EXCESS_ENTRIES:
        return UploadCheck(409, f"{excess} entries of the upload are already stored; start "
                                f"from {next_entry}")
    return UploadCheck(0)
