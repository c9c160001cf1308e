"""The notary's memory that its store was found damaged: one file in the data directory.

The scrub (or a request that hit a damaged database page) stops writes in the running
process. A restart must not quietly resume them on the same damaged store, so the finding is
also written to ``DATA/store-damaged.json``; ``notary serve`` starts with writes stopped while
it exists, and ``notary check`` removes it once the store (typically a restored backup) passes
the full check.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from ledger.process.atomic import write_atomic

__all__ = ["DAMAGE_FILE", "clear_damage", "read_damage", "record_damage"]

DAMAGE_FILE = "store-damaged.json"


def _path(data: Path) -> Path:
    return data / DAMAGE_FILE


def record_damage(data: Path, reason: str, *, check: str) -> None:
    """Remember ``reason`` (kept if one is recorded already: the first finding matters), and
    the way out: ``check`` is the command that checks this store (with its --data)."""
    if _path(data).exists():
        return
    doc = {"reason": reason,
           "found": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
           "clear": f"restore the newest backup of the database, then run `{check}`"}
    write_atomic(_path(data), (json.dumps(doc, indent=2) + "\n").encode())


def read_damage(data: Path) -> str | None:
    """The recorded reason, or None when no damage is recorded."""
    try:
        raw = _path(data).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        reason = json.loads(raw).get("reason")
    except (ValueError, AttributeError):
        reason = None
    return reason if isinstance(reason, str) else f"{_path(data)} says the store is damaged"


def clear_damage(data: Path) -> bool:
    """Forget recorded damage (after a passing check); True if there was any."""
    try:
        _path(data).unlink()
    except FileNotFoundError:
        return False
    return True
