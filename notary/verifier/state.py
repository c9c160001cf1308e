"""Verification level 5: the verifier's memory of each log and the rules that use it.

A single receipt proves inclusion in *a* checkpoint signed by the log key. It cannot show that
the log showed everyone the same history: a log could sign two different trees of the same size
(a fork, or split view) or later serve a tree that drops entries (a rollback). A verifier catches
that by remembering the newest checkpoint it has verified for each log and proving every new
checkpoint consistent with it (RFC 9162 §2.1.4). A log is its origin *and* its key, as for the
monitor: every fresh install of the notary starts a new log under the default origin, and a
checkpoint signed by another key is another log's, not evidence against this one.

This module has two halves:

- :class:`StateFile`: the newest verified checkpoint per log, as JSON on disk, written
  atomically (temporary file, fsync, rename) under an advisory lock, so a crash or a second
  verifier running at the same time never leaves a torn or downgraded file;
- :class:`Reconciler`: the pure, sans-I/O rules that compare the stored checkpoint, the
  receipt's checkpoint and the log's latest one. It says which consistency proofs it needs;
  the caller fetches them (or not, offline) and hands back what it got.

State file format (``version`` 1)::

    {"version": 1,
     "logs": {"<log verifier key>": {"size": 7, "root": "<base64 root hash>",
                                     "checkpoint": "<the signed note, verbatim>",
                                     "vkey": "<the same log verifier key>",
                                     "updated": "2025-01-01T00:00:00Z"}}}

The log verifier key ``<origin>+<key id>+<key>`` names the log. Earlier versions keyed an entry
by the origin alone (a name holds no ``+``); such an entry still counts for the key its ``vkey``
names, and one that names none for the key its checkpoint verifies under, so no receipt fails
over an old file; remembering a checkpoint under the key replaces the origin's entry.

The signed note is kept whole so that it is evidence on its own (anyone can check its signature)
and is re-verified under the trusted log key every time it is used: editing the file cannot make
the verifier accept anything, only make it complain.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from ledger.core.boundedjson import JsonError
from ledger.process.atomic import write_atomic
from notary.core.errors import NotaryBaseError
from notary.verifier.inputs import parse_input_json

if sys.platform != "win32":  # advisory locking is POSIX; elsewhere the atomic rename still holds
    import fcntl
from ledger.core.checkpoint import Checkpoint
from ledger.core.proofs import ProofError, verify_consistency

__all__ = [
    "DEFAULT_STATE_PATH",
    "STATE_VERSION",
    "Conflict",
    "ProofResult",
    "Reconciler",
    "Reconciliation",
    "Seen",
    "StateFile",
    "StoredCheckpoint",
    "VerifierStateError",
]

DEFAULT_STATE_PATH = Path("~/.config/mcp-notary/verifier-state.json")
"""Where ``notary verify`` and ``notary mcp`` remember checkpoints unless told otherwise."""

STATE_VERSION = 1

MAX_SIZE = 2**53 - 1
"""Largest tree size a state entry may hold: every size both verifiers represent exactly (a
JavaScript number), so a larger one is refused by both alike; no log comes near it."""

Label = Literal["stored", "receipt", "latest"]
"""Where a checkpoint came from: the state file, the receipt's proof, or the log just now."""

_DESCRIBE: dict[str, str] = {
    "stored": "the checkpoint already seen (state file)",
    "receipt": "the receipt's checkpoint",
    "latest": "the log's latest checkpoint",
}


class VerifierStateError(NotaryBaseError, ValueError):
    """The state file cannot be read or written (a usage/input problem, not a verdict)."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class StoredCheckpoint:
    """One log's entry in the state file (the note is verified again before any use).

    ``vkey`` is the log verifier key it was verified under; empty only in an entry of an older
    file that recorded none."""

    origin: str
    size: int
    root: str
    checkpoint: str
    vkey: str = ""
    updated: str = ""

    def to_json(self) -> dict[str, object]:
        return {"size": self.size, "root": self.root, "checkpoint": self.checkpoint,
                "vkey": self.vkey, "updated": self.updated}

    @classmethod
    def from_json(cls, key: str, obj: object) -> StoredCheckpoint:
        """The entry stored under ``key``: a log verifier key, or an origin (older files)."""
        origin = key.split("+", 1)[0]
        if not isinstance(obj, Mapping):
            raise VerifierStateError(f"logs[{key!r}] must be an object")
        size, root, note = obj.get("size"), obj.get("root"), obj.get("checkpoint")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_SIZE:
            raise VerifierStateError(f"logs[{key!r}].size must be an integer from 0 to "
                                     f"{MAX_SIZE}")
        if not isinstance(root, str) or not isinstance(note, str):
            raise VerifierStateError(f"logs[{key!r}] needs 'root' and 'checkpoint' strings")
        vkey, updated = obj.get("vkey", ""), obj.get("updated", "")
        return cls(origin, size, root, note, vkey if isinstance(vkey, str) else "",
                   updated if isinstance(updated, str) else "")


class StateFile:
    """The newest verified checkpoint per log origin, persisted as JSON at ``path``.

    Reads never create anything: a missing file is an empty state. Writes create the directory
    (0700) and the file (0600), replace it atomically, and go through :meth:`remember`, which
    re-reads the file under a lock so that two verifiers never move an origin backwards.
    """

    def __init__(self, path: Path) -> None:
        self.path = path.expanduser()

    def load(self) -> dict[str, StoredCheckpoint]:
        """Every entry by its key in the file (a log verifier key; an origin in older files);
        :class:`VerifierStateError` for a corrupt file."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise VerifierStateError(f"cannot read the state file {self.path}: {e}") from e
        try:
            doc = parse_input_json(raw)
        except JsonError as e:
            raise VerifierStateError(f"the state file {self.path} is not valid JSON: {e}") from e
        version = doc.get("version") if isinstance(doc, Mapping) else None
        if type(version) is not int or version != STATE_VERSION:  # not True, not 1.0
            raise VerifierStateError(f"the state file {self.path} is not a version-{STATE_VERSION} "
                             "verifier state ({\"version\": 1, \"logs\": {...}})")
        logs = doc.get("logs", {})
        if not isinstance(logs, Mapping):
            raise VerifierStateError(f"the state file {self.path}: 'logs' must be an object")
        return {str(o): StoredCheckpoint.from_json(str(o), v) for o, v in logs.items()}

    def get(self, vkey: str) -> StoredCheckpoint | None:
        """The entry of the log with verifier key ``vkey`` (``<origin>+<id>+<key>``), or the
        origin's entry of an older file (keyed by origin) when it names this key or none; the
        caller verifies its checkpoint under the key either way."""
        return _lookup(self.load(), vkey)

    def other_keys(self, vkey: str) -> list[str]:
        """The log keys with an entry under the origin of ``vkey``, other than ``vkey``: other
        logs of that name (a notary started over), worth telling the user about."""
        origin = vkey.split("+", 1)[0]
        found = {e.vkey or key for key, e in self.load().items() if e.origin == origin}
        return sorted(k for k in found if k != vkey)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An advisory lock on a sidecar file, where the platform has ``fcntl``."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if sys.platform == "win32":  # pragma: no cover - no fcntl
            yield
            return
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _write(self, logs: Mapping[str, StoredCheckpoint]) -> None:
        doc = {"version": STATE_VERSION,
               "logs": {o: logs[o].to_json() for o in sorted(logs)}}
        data = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()
        write_atomic(self.path, data)

    def remember(self, checkpoint: Checkpoint, note: bytes, vkey: str) -> bool:
        """Store ``checkpoint`` as the newest seen for the log of ``vkey``; False if a newer one
        is there. An older file's entry for its origin and this key is replaced.

        The caller has verified it and proved it consistent with what it loaded. If another
        verifier stored a larger checkpoint meanwhile, that one is kept: moving backwards would
        forget a tree head that later checkpoints must extend.
        """
        try:
            with self._locked():
                logs = self.load()
                current = _lookup(logs, vkey)
                if current is not None and current.vkey and current.size > checkpoint.size:
                    return False
                legacy = logs.get(checkpoint.origin)
                if legacy is not None and legacy.vkey == vkey:
                    del logs[checkpoint.origin]  # migrated: now kept under the key
                logs[vkey] = StoredCheckpoint(
                    checkpoint.origin, checkpoint.size,
                    base64.b64encode(checkpoint.root_hash).decode(), note.decode("utf-8"),
                    vkey, _now())
                self._write(logs)
                return True
        except OSError as e:
            raise VerifierStateError(f"cannot write the state file {self.path}: {e}") from e


def _lookup(logs: Mapping[str, StoredCheckpoint], vkey: str) -> StoredCheckpoint | None:
    found = logs.get(vkey)
    if found is not None:
        return found
    legacy = logs.get(vkey.split("+", 1)[0])
    return legacy if legacy is not None and legacy.vkey in (vkey, "") else None


# ---------------------------------------------------------------------------------------------
# Reconciling checkpoints (pure)


@dataclass(frozen=True)
class Seen:
    """A checkpoint verified under the trusted log key, with its signed note and its source."""

    label: Label
    checkpoint: Checkpoint
    note: bytes

    @property
    def size(self) -> int:
        return self.checkpoint.size

    def describe(self) -> str:
        return f"{_DESCRIBE[self.label]} (size {self.size})"


@dataclass(frozen=True)
class Conflict:
    """Two signed checkpoints of one log that cannot both be honest views of one history."""

    kind: Literal["fork", "rollback"]
    message: str
    first: Seen
    second: Seen

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "message": self.message,
            "checkpoints": [
                {"source": s.label, "size": s.size,
                 "root": base64.b64encode(s.checkpoint.root_hash).decode(),
                 "note": s.note.decode("utf-8", "replace")}
                for s in (self.first, self.second)
            ],
        }


@dataclass(frozen=True)
class ProofResult:
    """What fetching one consistency proof gave.

    ``proof`` when the log answered with one; otherwise ``problem`` says why not, and
    ``refused`` tells a log that answered but would not or could not prove (an HTTP 4xx, a
    malformed answer: evidence against the log) from one that could not be asked (network
    down, 5xx, offline: no evidence either way).
    """

    proof: tuple[bytes, ...] | None = None
    problem: str = ""
    refused: bool = False


Pair = tuple[Seen, Seen]


@dataclass
class Reconciliation:
    """The outcome: conflicts, proven pairs, pairs left unchecked (with why), what to store."""

    conflicts: list[Conflict] = field(default_factory=list)
    checked: list[Pair] = field(default_factory=list)
    unchecked: list[tuple[Pair, str]] = field(default_factory=list)
    newest: Seen | None = None

    def connected(self, a: Seen, b: Seen) -> bool:
        """Whether ``a`` and ``b`` are linked by proven consistency (directly or through others).

        Consistency is transitive for checkpoints of one log: if A and C are both prefixes of B,
        the smaller of A and C is a prefix of the larger.
        """
        reach = {a.label}
        grew = True
        while grew:
            grew = False
            for x, y in self.checked:
                for u, v in ((x, y), (y, x)):
                    if u.label in reach and v.label not in reach:
                        reach.add(v.label)
                        grew = True
        return b.label in reach


class Reconciler:
    """Compare the stored, receipt and latest checkpoints of one origin, pair by pair.

    Rules for each pair (every checkpoint here already verified under the trusted log key):

    - equal sizes: the roots must be equal, else a **fork** (one key signed two trees);
    - different sizes: a consistency proof from the smaller to the larger, fetched from the log,
      must verify. When it does not, or the log will not give one for two checkpoints it signed
      (an HTTP 4xx, such as "beyond the current tree size"), that is a **rollback** if the
      smaller one is the log's latest (the log now serves a tree that drops what it committed
      to) or the receipt's checkpoint against the stored one (an older view that is not a
      prefix of what was seen), and a **fork** otherwise.

    The log's latest checkpoint may legitimately be smaller than one already seen: a log that
    publishes only witnessed checkpoints lags its own tree. That is accepted exactly when the
    log proves it to be a prefix of the larger one, which a log that really lost entries cannot.
    """

    def __init__(self, stored: Seen | None, receipt: Seen, latest: Seen | None) -> None:
        self.stored = stored
        self.receipt = receipt
        self.latest = latest
        self.seen = [s for s in (stored, receipt, latest) if s is not None]
        self._result = Reconciliation()
        self._pending: list[Pair] = []
        for i, a in enumerate(self.seen):
            for b in self.seen[i + 1:]:
                self._classify(a, b)

    def _classify(self, a: Seen, b: Seen) -> None:
        small, big = (a, b) if a.size <= b.size else (b, a)
        res = self._result
        if small.size == big.size:
            if small.checkpoint.root_hash == big.checkpoint.root_hash:
                res.checked.append((small, big))
            else:
                res.conflicts.append(Conflict(
                    "fork", f"{small.describe()} and {big.describe()} have the same size but "
                    "different root hashes: the log key signed two different trees", small, big))
            return
        self._pending.append((small, big))

    def proofs_needed(self) -> list[tuple[int, int]]:
        """The (old size, new size) consistency proofs to fetch; none when all is settled."""
        return sorted({(s.size, b.size) for s, b in self._pending})

    def finish(self, proofs: Mapping[tuple[int, int], ProofResult]) -> Reconciliation:
        """Verify the fetched proofs (missing ones count as not fetched) and decide."""
        res = self._result
        for small, big in self._pending:
            got = proofs.get((small.size, big.size))
            rollback = small.label == "latest" or (small.label, big.label) == ("receipt", "stored")
            kind: Literal["fork", "rollback"] = "rollback" if rollback else "fork"
            lead = (f"the log now serves size {small.size}, smaller than {big.describe()}, and "
                    if small.label == "latest" else "")
            if got is None or got.proof is None:
                if got is not None and got.refused:
                    res.conflicts.append(Conflict(
                        kind, f"{lead}the log gave no consistency proof from {small.describe()} "
                        f"to {big.describe()}, both signed by its key: {got.problem}",
                        small, big))
                else:
                    why = got.problem if got is not None else "needs a consistency proof (offline)"
                    res.unchecked.append(((small, big), why))
                continue
            try:
                verify_consistency(small.size, big.size, small.checkpoint.root_hash,
                                   big.checkpoint.root_hash, got.proof)
            except ProofError as e:
                what = ("is older than and not a prefix of" if kind == "rollback"
                        else "is not a prefix of")
                res.conflicts.append(Conflict(
                    kind, f"{lead}{small.describe()} {what} {big.describe()}: {e}", small, big))
                continue
            res.checked.append((small, big))
        res.newest = None if res.conflicts else self._newest(res)
        return res

    def _newest(self, res: Reconciliation) -> Seen | None:
        """The largest checkpoint proven consistent with the stored one (or, with none stored,
        with the receipt's); None when that is the stored one itself."""
        anchor = self.stored or self.receipt
        best = max((s for s in self.seen if res.connected(anchor, s)), key=lambda s: s.size)
        if self.stored is not None and best.size <= self.stored.size:
            return None
        return best


def describe_pairs(pairs: Sequence[tuple[Pair, str]]) -> str:
    """One line saying which comparisons could not be made and why."""
    return "; ".join(f"{a.describe()} vs {b.describe()}: {why}" for (a, b), why in pairs)
