"""Damage to an SQLite database file: recognising it, looking for it, and saying what to do.

A flipped bit on disk, a torn copy or a file that is not a database at all surfaces as
``sqlite3.DatabaseError`` ("database disk image is malformed", "file is not a database") at
whatever statement first touches the bad page: at start, or hours later in one request. That
is not a bug to show as a traceback, and not a transient error to retry: the file must be
replaced by a backup. So commands recognise it (:func:`corruption_in`) and say so in one
message that names the file and the way out (:func:`damage_message`), and full checks run
SQLite's own page-level check first (:func:`integrity_errors`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["corruption_in", "damage_message", "describe_findings", "integrity_errors"]

_CORRUPT_CODES = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_CORRUPT_TEXT = ("malformed", "file is not a database", "database corruption")


def corruption_in(exc: BaseException) -> sqlite3.DatabaseError | None:
    """The SQLite "the file is damaged" error that ``exc`` is or was raised from, if any.

    Locks, a full disk or I/O errors (``SQLITE_BUSY``, ``SQLITE_FULL``, ``SQLITE_IOERR``) are
    not damage: they pass when the condition does.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlite3.DatabaseError):
            name = getattr(current, "sqlite_errorname", "") or ""
            text = str(current).lower()
            if name.startswith(_CORRUPT_CODES) or any(t in text for t in _CORRUPT_TEXT):
                return current
        current = current.__cause__ or current.__context__
    return None


def damage_message(path: Path | str | None, exc: BaseException, check: str | None) -> str:
    """What a command prints when the database is damaged: the file, SQLite's words for what
    is wrong, and what to do (``check`` is the command that verifies a restored copy)."""
    found = corruption_in(exc)
    reason = str(found if found is not None else exc)
    where = f"the database {path}" if path is not None else "the database"
    then = f", run `{check}` on it" if check else ""
    return (f"{where} is damaged ({reason}). Stop every process using it, restore the newest "
            f"backup of it{then}, and only then start serving from it again.")


def integrity_errors(path: Path, *, limit: int = 20) -> list[str]:
    """SQLite's ``PRAGMA integrity_check`` of the file at ``path``: [] when it is sound, else
    its first ``limit`` findings, one a line.

    It reads every page (b-trees, indexes, free list), so it finds damage in rows no query has
    touched yet; it takes a few seconds per gigabyte. It never writes, and may run beside a
    server using the file.
    """
    if not path.is_file():
        return [f"{path} does not exist"]
    try:
        conn = sqlite3.connect(path, timeout=30)
    except sqlite3.DatabaseError as e:
        return [str(e)]
    try:
        rows = conn.execute(f"PRAGMA integrity_check({int(limit)})").fetchall()
    except sqlite3.DatabaseError as e:
        return [str(e)]
    finally:
        conn.close()
    messages = [line for r in rows for line in str(r[0]).splitlines()
                if line.strip() and not line.startswith("*** in database")]
    return [] if messages == ["ok"] else messages[:limit]


def describe_findings(findings: list[str], shown: int = 3) -> str:
    """The first few findings of :func:`integrity_errors` on one line."""
    more = len(findings) - shown
    return "; ".join(findings[:shown]) + (f" (and {more} more)" if more > 0 else "")
