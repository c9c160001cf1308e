"""Private key files: created 0600 without a window where others could read them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ledger.core.errors import LedgerError
from ledger.process.atomic import fsync_dir


class KeyFileError(LedgerError, RuntimeError):
    pass


def write_secret(path: Path, text: str) -> None:
    """Create ``path`` with mode 0600 and ``text``; never overwrite an existing key."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as e:
        raise KeyFileError(f"{path} already exists; refusing to overwrite a key") from e
    with os.fdopen(fd, "w") as f:
        f.write(text.rstrip("\n") + "\n")
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(path.parent)


def read_secret(path: Path) -> str:
    """Read a key file, refusing one that anyone but its owner can read or write."""
    try:
        st = path.stat()
    except FileNotFoundError as e:
        raise KeyFileError(f"key file {path} does not exist") from e
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(
            f"key file {path} is accessible by others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run: chmod 600 {path}"
        )
    return path.read_text().strip()
