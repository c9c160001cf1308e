"""What a monitor remembers between polls and restarts, written atomically as one JSON file.

- ``checkpoint``: the last checkpoint it verified (signature, quorum, consistency with the one
  before). Every later checkpoint must be provably an extension of it, so losing or rolling back
  this file would let a forked log pass: it is replaced only by a rename of a fully written,
  fsynced temporary file.
- ``audit``: the compact state (size, perfect-subtree roots, right-edge tiles and bundle) of the
  tree the audit last recomputed and matched against a verified root; the next audit continues
  from there instead of downloading the whole log again.
- ``progress``: the same, part way through a long audit, so a restart resumes it. It is only
  trusted up to the next root check: a failed audit drops it.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

from ledger.core.compact import TreeState
from ledger.core.errors import LedgerError
from ledger.process.atomic import write_atomic

__all__ = ["MonitorState", "MonitorStateError", "load_state", "save_state"]

VERSION = 1


class MonitorStateError(LedgerError, RuntimeError):
    """The state file is unreadable or belongs to another log."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: object) -> bytes:
    if not isinstance(text, str):
        raise MonitorStateError("state file: expected base64 text")
    return base64.b64decode(text, validate=True)


def tree_to_json(state: TreeState) -> dict[str, object]:
    return {
        "size": state.size,
        "stack": [_b64(h) for h in state.stack],
        "edge_tiles": {str(level): _b64(data) for level, data in state.edge_tiles.items()},
        "edge_bundle": _b64(state.edge_bundle),
    }


def tree_from_json(obj: object) -> TreeState:
    if not isinstance(obj, dict):
        raise MonitorStateError("state file: tree state must be an object")
    try:
        size = obj["size"]
        if not isinstance(size, int) or size < 0:
            raise MonitorStateError("state file: bad tree size")
        return TreeState(
            size=size,
            stack=tuple(_unb64(h) for h in obj["stack"]),
            edge_tiles={int(k): _unb64(v) for k, v in obj["edge_tiles"].items()},
            edge_bundle=_unb64(obj["edge_bundle"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise MonitorStateError(f"state file: malformed tree state: {e}") from None


@dataclass(frozen=True)
class MonitorState:
    """One log's monitoring state (see the module docstring)."""

    origin: str
    vkey: str
    checkpoint: bytes | None = None  # the last verified checkpoint note, verbatim
    audit: TreeState | None = None
    progress: TreeState | None = None
    extra: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "version": VERSION,
            "origin": self.origin,
            "vkey": self.vkey,
            "checkpoint": None if self.checkpoint is None else self.checkpoint.decode("utf-8"),
            "audit": None if self.audit is None else tree_to_json(self.audit),
            "progress": None if self.progress is None else tree_to_json(self.progress),
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, obj: object) -> MonitorState:
        if not isinstance(obj, dict) or obj.get("version") != VERSION:
            raise MonitorStateError(f"state file: not a version-{VERSION} monitor state")
        origin, vkey, cp = obj.get("origin"), obj.get("vkey"), obj.get("checkpoint")
        if not isinstance(origin, str) or not isinstance(vkey, str):
            raise MonitorStateError("state file: origin and vkey must be text")
        if cp is not None and not isinstance(cp, str):
            raise MonitorStateError("state file: checkpoint must be text")
        extra = obj.get("extra", {})
        return cls(
            origin=origin,
            vkey=vkey,
            checkpoint=None if cp is None else cp.encode("utf-8"),
            audit=None if obj.get("audit") is None else tree_from_json(obj["audit"]),
            progress=None if obj.get("progress") is None else tree_from_json(obj["progress"]),
            extra=extra if isinstance(extra, dict) else {},
        )


def load_state(path: Path) -> MonitorState | None:
    """The saved state, or None when the file does not exist yet."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise MonitorStateError(f"cannot read state file {path}: {e}") from e
    try:
        obj = json.loads(raw)
    except ValueError as e:
        raise MonitorStateError(f"state file {path} is not JSON: {e}") from e
    return MonitorState.from_json(obj)


def save_state(path: Path, state: MonitorState) -> None:
    """Replace ``path`` with ``state`` atomically and durably (temp file, fsync, rename, fsync).

    A crash leaves either the old file or the new one, never a torn one.
    """
    write_atomic(path, json.dumps(state.to_json(), separators=(",", ":")).encode("utf-8"))
