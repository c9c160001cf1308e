"""The newest checkpoint a writer has seen committed, remembered across restarts.

A writer refuses to sign a tree that does not extend the newest checkpoint it saw committed
(:class:`~ledger.log.errors.LogRollbackError`). In memory that protects a running process; this
file carries it over a restart, so a frontend restarted against a database restored from an
older backup (or a standby that lost commits) refuses to write instead of forking the log.

It is written at most every ``interval`` seconds (and at shutdown), so it is a lower bound of
what the process saw; it never goes backwards, even when several processes on one data
directory (``--workers``) share it. The note is public (a signed checkpoint), the file 0600 as
every state file.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import structlog

from ledger.process.atomic import write_atomic
from ledger.storage.base import CheckpointRecord

__all__ = ["SeenCheckpoint"]

_log = structlog.get_logger("ledger.log.seen")


class SeenCheckpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._saved_size = -1
        self._saved_origin = b""

    def load(self) -> CheckpointRecord | None:
        """The remembered checkpoint, or None (no file yet). A damaged file is an error: it is
        the writer's only memory of what it promised."""
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise ValueError(f"{self.path} is unreadable ({e}); it holds the newest checkpoint "
                             "this notary saw: restore it, or remove it to trust the store as "
                             "it is") from None
        try:
            record = CheckpointRecord(int(doc["size"]), float(doc["time"]),
                                      str(doc["note"]).encode("utf-8"))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{self.path} is malformed ({e})") from None
        self._saved_size, self._saved_origin = record.size, _origin(record.note)
        return record

    def save(self, record: CheckpointRecord) -> None:
        """Remember ``record`` unless the file already holds one of its log at least as large."""
        origin = _origin(record.note)
        if record.size <= self._saved_size and origin == self._saved_origin:
            return
        try:
            current = self.load()
        except ValueError:
            current = None
        if current is not None and current.size >= record.size and \
                _origin(current.note) == _origin(record.note):
            return  # (a checkpoint of the next log, after a roll, replaces the last log's)
        doc = {"size": record.size, "time": record.time, "note": record.note.decode("utf-8")}
        write_atomic(self.path, json.dumps(doc).encode("utf-8"))
        self._saved_size, self._saved_origin = record.size, origin

    async def keep(self, get: Callable[[], CheckpointRecord | None], *,
                   interval: float = 1.0) -> None:
        """Save ``get()`` every ``interval`` seconds until cancelled (then once more)."""
        try:
            while True:
                await asyncio.sleep(interval)
                await self._save_now(get)
        finally:
            await asyncio.shield(self._save_now(get))

    async def _save_now(self, get: Callable[[], CheckpointRecord | None]) -> None:
        record = get()
        if record is None or (record.size <= self._saved_size
                              and _origin(record.note) == self._saved_origin):
            return
        try:
            await asyncio.to_thread(self.save, record)
        except OSError as e:
            _log.warning("seen_checkpoint_not_saved", path=str(self.path), error=str(e))


def _origin(note: bytes) -> bytes:
    """A checkpoint's origin line (the log it is of)."""
    return note.split(b"\n", 1)[0]
