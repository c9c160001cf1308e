"""``notary backup`` and ``notary restore``: a copy of a data directory that is safe to restore.

Backup (online, beside a running notary): SQLite's backup API copies the database as one
consistent snapshot while writers go on; then the key files are copied (the database first,
so a receipt key rotated meanwhile is in the copy's key directory even if its public half is
not yet in the copy's database); every file keeps its mode (keys and the database 0600, the
directories 0700). ``backup.json`` records what the copy holds: the log's origin and its
signed checkpoint (size and root).

Restore refuses to bring back an **older** state of a log that has moved on, because serving
it would fork the log (witnesses and monitors hold the newer checkpoints and would catch
it). It compares the backup's checkpoint with every newer one it can see:

- the checkpoint in the data directory being replaced (if any);
- the witnessed checkpoint and the witnesses' sizes the notary recorded there
  (``witnessing.json``);
- any checkpoint given with ``--checkpoint`` (a saved ``/checkpoint`` note, or a URL), e.g.
  from a monitor or the witnesses, for when the data directory itself is lost.

A checkpoint beyond the backup's size refuses the restore; one at or below it must have the
root the backup's own tree has at that size (else the backup is of another history). The data
directory being replaced is moved aside (``<data>.replaced-<time>``), never deleted; it holds
the log's private key, so it gets a ``.gitignore`` that keeps all of it out of a repository.

Restore also refuses while a server runs on the data directory (:mod:`ledger.process.dirlock`): the
server would go on writing into the moved-aside copy. The restored directory is built beside
the data directory and renamed into place, so a restore cut short leaves the old one as it was.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger.core.checkpoint import Checkpoint, open_checkpoint
from ledger.core.hashing import EMPTY_ROOT, fold_right
from ledger.core.note import Ed25519Verifier, NoteError
from ledger.jobs.witnessing import STATE_FILE as WITNESSING_FILE
from ledger.log.reader import LogReader, stack_coords
from ledger.process import event_loop
from ledger.process.dirlock import DirectoryInUseError, exclusive
from ledger.storage.sqlite import SqliteStore
from notary.core.errors import NotaryBaseError
from notary.serving.keys import DB_NAME, Paths

__all__ = ["MANIFEST", "BackupError", "BackupInfo", "backup", "restore"]

MANIFEST = "backup.json"


class BackupError(NotaryBaseError):
    """A backup or restore that cannot be done safely; the message says why and what to do."""


@dataclass(frozen=True)
class BackupInfo:
    """What a backup holds: the log and the checkpoint its database was copied at."""

    origin: str
    size: int
    root: bytes
    checkpoint: bytes
    receipt_keys: int

    def describe(self) -> str:
        return (f"log {self.origin!r} at size {self.size} (root "
                f"{base64.b64encode(self.root).decode()}), {self.receipt_keys} receipt key(s)")


def _log_state(db: Path) -> bytes | None:
    """The signed checkpoint stored in a log database (read-only), or None for an empty log."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise BackupError(f"cannot open {db}: {e}") from None
    try:
        row = conn.execute("SELECT note FROM log_state WHERE one = 1").fetchone()
    except sqlite3.Error as e:
        raise BackupError(f"{db} is not a notary database: {e}") from None
    finally:
        conn.close()
    return None if row is None else bytes(row[0])


def _verifier(paths: Paths) -> Ed25519Verifier:
    try:
        return Ed25519Verifier.from_vkey(paths.log_vkey.read_text().strip())
    except (OSError, NoteError) as e:
        raise BackupError(f"cannot read the log verifier key {paths.log_vkey}: {e}") from None


def _open(note: bytes, verifier: Ed25519Verifier, where: str) -> Checkpoint:
    try:
        cp, _ = open_checkpoint(note, verifier)
    except (NoteError, ValueError) as e:
        raise BackupError(f"the checkpoint in {where} does not verify under the log key: {e}"
                          ) from None
    return cp


def _copy_file(src: Path, dst: Path) -> None:
    """Copy bytes and mode (never wider than the source's), fsynced."""
    mode = stat.S_IMODE(src.stat().st_mode)
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode & 0o777)
    with os.fdopen(fd, "wb") as out, src.open("rb") as inp:
        shutil.copyfileobj(inp, out)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(dst, mode)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def backup(data: Path, dest: Path) -> BackupInfo:
    """Copy the notary in ``data`` to the new directory ``dest`` (online; modes kept)."""
    src = Paths(data)
    if not src.db.exists():
        raise BackupError(f"no notary database at {src.db}")
    if dest.exists() and any(dest.iterdir()):
        raise BackupError(f"{dest} exists and is not empty; back up into a new directory")
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(dest, 0o700)
    out = Paths(dest)
    tmp = dest / f".{DB_NAME}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # 0600 before any byte
    os.close(fd)
    try:
        source = sqlite3.connect(f"file:{src.db}?mode=ro", uri=True, timeout=30)
        target = sqlite3.connect(tmp)
        try:
            source.backup(target)  # one consistent snapshot, writers keep going
            target.execute("PRAGMA journal_mode = DELETE")  # a single self-contained file
        finally:
            target.close()
            source.close()
        with tmp.open("rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, out.db)
    except (sqlite3.Error, OSError) as e:
        tmp.unlink(missing_ok=True)
        raise BackupError(f"the database backup failed: {e}") from None
    for name in ("log.key", "log.vkey", WITNESSING_FILE):
        if (src.root / name).exists():
            _copy_file(src.root / name, dest / name)
    count = 0
    if src.receipt_keys.is_dir():
        out.receipt_keys.mkdir(mode=0o700)
        for key in sorted(src.receipt_keys.glob("*.key")):
            _copy_file(key, out.receipt_keys / key.name)
            count += 1
        _fsync_dir(out.receipt_keys)
    note = _log_state(out.db)
    verifier = _verifier(out)
    cp = _open(note, verifier, str(out.db)) if note is not None else Checkpoint(
        verifier.name, 0, EMPTY_ROOT)
    info = BackupInfo(cp.origin, cp.size, cp.root_hash, note or b"", count)
    manifest = {"format": 1, "origin": info.origin, "size": info.size,
                "root": base64.b64encode(info.root).decode(),
                "checkpoint": info.checkpoint.decode("utf-8"), "receipt_keys": count,
                "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    fd = os.open(dest / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(manifest, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(dest)
    return info


async def _root_at(db: Path, size: int) -> bytes:
    store = await SqliteStore.open(db)
    try:
        reader = LogReader(store)
        hashes = await reader.hashes(stack_coords(size), size)
        return fold_right(list(hashes.values())) if size else EMPTY_ROOT
    finally:
        await store.close()


def _newer_evidence(data: Path, verifier: Ed25519Verifier, extra: list[tuple[str, bytes]]
                    ) -> tuple[list[tuple[str, Checkpoint]], list[tuple[str, int]]]:
    """Checkpoints (where, checkpoint) and bare witness sizes (where, size) seen elsewhere."""
    checkpoints: list[tuple[str, Checkpoint]] = []
    sizes: list[tuple[str, int]] = []
    paths = Paths(data)
    if paths.db.exists():
        note = _log_state(paths.db)
        if note is not None:
            checkpoints.append((str(paths.db), _open(note, verifier, str(paths.db))))
    state = data / WITNESSING_FILE
    if state.exists():
        try:
            doc: Any = json.loads(state.read_text())
            published = doc.get("published")
            if isinstance(published, str):
                checkpoints.append((f"{state} (witnessed)",
                                    _open(published.encode(), verifier, str(state))))
            for vkey, item in (doc.get("witnesses") or {}).items():
                if isinstance(item, dict) and isinstance(item.get("size"), int):
                    sizes.append((f"witness {vkey.split('+', 1)[0]} ({state})", item["size"]))
        except (OSError, ValueError, AttributeError) as e:
            raise BackupError(f"cannot read {state}: {e}") from None
    for where, note in extra:
        checkpoints.append((where, _open(note, verifier, where)))
    return checkpoints, sizes


def restore(backup_dir: Path, data: Path, checkpoints: list[tuple[str, bytes]] | None = None,
            *, command: str = "notary restore") -> tuple[BackupInfo, Path | None]:
    """Restore ``backup_dir`` into ``data``, refusing one older than the log has become.

    ``checkpoints`` are (where, signed note) seen elsewhere. Returns the backup's description
    and where the replaced data directory was moved (None when there was none). ``command``:
    this restore as the operator typed it, to run again once the server has stopped.
    """
    bak = Paths(backup_dir)
    if not bak.db.exists() or not bak.log_key.exists():
        raise BackupError(f"{backup_dir} is not a notary backup (no {DB_NAME} or log.key)")
    verifier = _verifier(bak)
    note = _log_state(bak.db)
    cp = _open(note, verifier, str(bak.db)) if note is not None else Checkpoint(
        verifier.name, 0, EMPTY_ROOT)
    keys = len(list(bak.receipt_keys.glob("*.key"))) if bak.receipt_keys.is_dir() else 0
    info = BackupInfo(cp.origin, cp.size, cp.root_hash, note or b"", keys)
    if not data.exists():
        return info, _replace(backup_dir, data, info, verifier, checkpoints)
    try:
        with exclusive(data, command):
            return info, _replace(backup_dir, data, info, verifier, checkpoints)
    except DirectoryInUseError as e:
        raise BackupError(str(e)) from None


IGNORE_ALL = "# Moved aside by `notary restore`: holds the log's private key. Never commit it.\n*\n"


def _replace(backup_dir: Path, data: Path, info: BackupInfo, verifier: Ed25519Verifier,
             checkpoints: list[tuple[str, bytes]] | None) -> Path | None:
    """The checks against what ``data`` has seen, then the swap; where the old one went."""
    target = Paths(data)
    if target.log_vkey.exists() and _verifier(target).vkey != verifier.vkey:
        raise BackupError(f"{data} holds another log ({_verifier(target).vkey}); the backup is "
                          f"of {verifier.vkey}: restore into a new directory")
    seen, sizes = _newer_evidence(data, verifier, list(checkpoints or []))
    for where, size in sizes:
        if size > info.size:
            raise BackupError(
                f"refusing to restore: {where} has cosigned size {size}, the backup is at size "
                f"{info.size}. The log has moved on since this backup; serving it would fork "
                "the log. Restore a newer backup, or start a new log with a new origin.")
    for where, other in seen:
        if other.origin != info.origin:
            raise BackupError(f"{where} is a checkpoint of {other.origin!r}, not {info.origin!r}")
        if other.size > info.size:
            raise BackupError(
                f"refusing to restore: {where} holds a checkpoint at size {other.size}, the "
                f"backup is at size {info.size}. The log has moved on since this backup; "
                "serving it would fork the log. Restore a newer backup, or start a new log "
                "with a new origin.")
        root = event_loop.run(_root_at(Paths(backup_dir).db, other.size))
        if root != other.root_hash:
            raise BackupError(
                f"refusing to restore: {where} (size {other.size}) has another root than the "
                "backup's tree at that size: the backup is of a different history")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    data.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    staged = data.with_name(f".{data.name}.restoring-{stamp}")
    shutil.rmtree(staged, ignore_errors=True)  # an earlier restore of this second, cut short
    staged.mkdir(mode=0o700)
    try:
        os.chmod(staged, 0o700)
        for item in sorted(backup_dir.iterdir()):
            if item.name == MANIFEST or item.name.startswith("."):
                continue
            if item.is_dir():
                (staged / item.name).mkdir(mode=stat.S_IMODE(item.stat().st_mode))
                for sub in sorted(item.iterdir()):
                    _copy_file(sub, staged / item.name / sub.name)
                _fsync_dir(staged / item.name)
            else:
                _copy_file(item, staged / item.name)
        _fsync_dir(staged)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    moved: Path | None = None
    if data.exists():
        if any(data.iterdir()):
            moved = data.with_name(f"{data.name}.replaced-{stamp}")
            os.replace(data, moved)
            (moved / ".gitignore").write_text(IGNORE_ALL)
        else:
            data.rmdir()
    os.replace(staged, data)
    _fsync_dir(data.parent)
    return moved
