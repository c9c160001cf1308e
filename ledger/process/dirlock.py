"""Who may use a data directory: the processes serving it, or one command that replaces it.

A server keeps writing where it opened its files: a restore that moved the directory aside
under a running server would lose every receipt acknowledged afterwards (they go into the
moved-aside copy) and fork the log (their indexes are issued again from the restored one).
So every process serving a directory holds a shared ``flock`` on the directory itself for as
long as it runs (the workers of ``--workers`` each their own), and a command that replaces or
rewrites the store takes an exclusive one without waiting, refusing while any server holds it.
A server starting while such a command runs is refused in the same way.

The lock is on the directory's own inode, not on a file in it: it creates nothing (a start
that fails leaves the directory as it was), and it moves with the directory when a restore
moves it aside. The kernel drops it with its holder, SIGKILL included.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ledger.core.errors import LedgerError

__all__ = ["DirectoryInUseError", "ServingLock", "exclusive"]


class DirectoryInUseError(LedgerError, RuntimeError):
    """The directory is served (for a command that replaces it), or being replaced (for a
    server); the message says what to do."""


def _open(directory: Path) -> int:
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


class ServingLock:
    """The shared lock a serving process holds on its data directory until it exits."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd = -1

    def take(self) -> None:
        """Hold the lock; :class:`DirectoryInUseError` while a command replaces the directory.

        Taken again if the directory was swapped under us between opening and locking (a
        restore moving it aside), so the lock held is the one on what ``directory`` names."""
        replaced = DirectoryInUseError(
            f"{self.directory} is being replaced or rewritten by another command (a restore); "
            "start the server again when it is done")
        for _ in range(3):
            try:
                fd = _open(self.directory)
            except FileNotFoundError:  # between a restore's two renames
                raise replaced from None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                same = os.path.samestat(os.fstat(fd), os.stat(self.directory))
            except (BlockingIOError, FileNotFoundError):
                os.close(fd)
                raise replaced from None
            if same:
                self._fd = fd
                return
            os.close(fd)
        raise replaced

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@contextlib.contextmanager
def exclusive(directory: Path, command: str) -> Iterator[None]:
    """Run the body as the only user of ``directory`` (which must exist), or raise
    :class:`DirectoryInUseError` at once while a server holds it."""
    fd = _open(directory)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DirectoryInUseError(
                f"a server is serving {directory} (a running `notary serve` or `ledger "
                f"serve`, or one of its workers, holds it): stop it first, then run "
                f"`{command}` again; nothing was changed") from None
        yield
    finally:
        os.close(fd)
