"""A notary's sequence of logs: their names, keys and receipt positions (pure, no I/O).

Log 0 is the log a notary starts with: its origin is the notary's base origin and its key is
``log.key``. Log n >= 1 (started by ``notary log roll``, docs/lifecycle.md) is named
``<base origin>/<shard>``, the shard being the UTC date it started (``YYYY-MM-DD``, then
``-2``, ``-3``… for more logs started the same day), and its Ed25519 seed is derived from
log 0's with HKDF-SHA256 over its origin: every process that holds ``log.key`` signs for any
later log with no new key to distribute (and whoever holds ``log.key`` can sign for all of
them, which is why a suspected ``log.key`` must be replaced, not rolled from).

A receipt row is keyed by its *position* ``n << 40 | index``: log 0's positions are its
indexes, as they always were.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

__all__ = ["COMPROMISED", "INDEX_BITS", "key_generations", "log_origin", "log_seed",
           "position", "retired_by", "shard_name", "split_position"]

INDEX_BITS = 40
"""Bits of a receipt position that hold the index in its log (2^40 entries a log)."""

_INFO = b"mcp-notary log key\n"

COMPROMISED = "compromised"
"""The roll reason that replaces ``log.key`` (an emergency roll, docs/lifecycle.md)."""


def key_generations(reasons: Sequence[str | None]) -> list[int]:
    """The root key generation of each log, oldest first, from each log's freeze reason
    (None: not frozen). Generation 0 is the first ``log.key``; a roll for ``compromised``
    makes a new root, so every log after it is one generation on. The registry holds the
    reasons, so it records which root each log's key comes from without a column of its own.
    """
    out, g = [], 0
    for reason in reasons:
        out.append(g)
        if reason == COMPROMISED:
            g += 1
    return out


def retired_by(reasons: Sequence[str | None]) -> list[int | None]:
    """For each log, the number of the log whose compromised roll retired its keys (every log
    of an older root generation than the newest), or None while its root is the current one."""
    gens = key_generations(reasons)
    ends = [i for i, r in enumerate(reasons) if r == COMPROMISED]
    return [next(e for e in ends if e >= i) if g < gens[-1] else None
            for i, g in enumerate(gens)] if gens else []


def shard_name(started: datetime, taken: Collection[str]) -> str:
    """The shard name of a log started at ``started``, unique among ``taken``."""
    if started.tzinfo is None:
        raise ValueError("a log's start needs a timezone-aware datetime")
    day = started.astimezone(UTC).strftime("%Y-%m-%d")
    name, k = day, 1
    while name in taken:
        k += 1
        name = f"{day}-{k}"
    return name


def log_origin(base: str, shard: str) -> str:
    """The origin of the log with this shard name (log 0, whose shard is '': ``base``)."""
    return f"{base}/{shard}" if shard else base


def log_seed(root_seed: bytes, origin: str) -> bytes:
    """The Ed25519 seed of the log ``origin``, from log 0's seed (``log.key``)."""
    if len(root_seed) != 32:
        raise ValueError("log 0's seed is 32 bytes")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=_INFO + origin.encode()).derive(root_seed)


def position(n: int, index: int) -> int:
    """Where a receipt of log ``n`` at ``index`` is kept in the notary's rows."""
    if n < 0 or not 0 <= index < 1 << INDEX_BITS:
        raise ValueError(f"no position for log {n} index {index}")
    return n << INDEX_BITS | index


def split_position(pos: int) -> tuple[int, int]:
    """(log number, index) of a receipt position."""
    return pos >> INDEX_BITS, pos & ((1 << INDEX_BITS) - 1)
