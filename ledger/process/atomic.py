"""Replacing a file so that a crash leaves the old version or the new one, never a torn one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, mode: int = 0o600, sync_dir: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, rename it over ``path``.

    ``sync_dir`` also fsyncs the directory, so that the rename itself survives a power loss;
    bulk writers of many files (a static export) may skip it per file.
    """
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(directory)


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries durable (a no-op where the platform cannot)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
