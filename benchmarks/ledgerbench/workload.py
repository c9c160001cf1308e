"""What every phase of the ledger benchmark runs on: sizes, durations, entries and the key.

Both systems get the identical entries in the identical order, made before any timing starts,
so no phase measures the making of its input.
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from ledger.core.note import Ed25519Signer

ENTRY_SIZE = 64
BATCHES = (1, 100, 1000)
BUILD_BATCH = 16384
ORIGIN = "bench.example/ledger"
SIGNER_SEED = hashlib.sha256(b"ledger_bench signer").digest()
ENTRY_SEED = 20240601


@dataclass(frozen=True)
class Config:
    mode: str
    append_seconds: float  # per system and batch size, split over append_turns turns
    append_turns: int
    limit_seconds: float
    small: int  # the "1M" size
    large: int  # the "10M" size
    warmup: int  # proofs run before timing, per kind
    samples: int  # proofs timed, per kind
    verify_seconds: float
    profile_seconds: float


FULL = Config("full", 6.0, 3, 2.0, 1_000_000, 10_000_000, 5000, 5000, 2.0, 4.0)
QUICK = Config("quick", 0.7, 1, 0.4, 100_000, 300_000, 1000, 1000, 0.4, 1.0)


def signer() -> Ed25519Signer:
    return Ed25519Signer(ORIGIN, SIGNER_SEED)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class EntryPool:
    """A fixed pool of 65,536 random 64-byte entries handed out in order, wrapping around.

    Both systems get the identical sequence, and no time is spent making entries while timing.
    """

    SIZE = 1 << 16

    def __init__(self, seed: int = ENTRY_SEED) -> None:
        blob = random.Random(seed).randbytes(ENTRY_SIZE * self.SIZE)
        self.entries = [blob[i : i + ENTRY_SIZE] for i in range(0, len(blob), ENTRY_SIZE)]
        self.pos = 0

    def take(self, n: int) -> list[bytes]:
        if self.pos + n > self.SIZE:
            self.pos = 0
        out = self.entries[self.pos : self.pos + n]
        self.pos += n
        return out


def generated_entries(seed: int, count: int, chunk: int) -> Iterator[list[bytes]]:
    """Deterministic unique random entries in chunks (both systems build the same trees)."""
    rng = random.Random(seed)
    done = 0
    while done < count:
        n = min(chunk, count - done)
        blob = rng.randbytes(ENTRY_SIZE * n)
        yield [blob[i : i + ENTRY_SIZE] for i in range(0, len(blob), ENTRY_SIZE)]
        done += n
