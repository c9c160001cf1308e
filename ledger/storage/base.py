"""The storage contract: tiles and entry bundles by (level, index), and the signed checkpoint.

A backend needs only keyed blobs and one atomic write transaction. The transaction is what makes
the log crash-safe: tiles, bundles and the checkpoint that commits to them become visible together
or not at all, so a signed checkpoint never refers to tiles that were lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

TileKey = tuple[int, int]  # (tile level, or -1 for entry bundles; tile index)


class StoreError(RuntimeError):
    """The store cannot be used as asked (missing, corrupt, or of another format)."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached right now (connection lost, failover under way).

    Nothing was written that was acknowledged; the caller may retry later (HTTP: 503).
    """


class WriterBusyError(StoreError):
    """Another writer holds the log's write lock for longer than we were willing to wait."""


@dataclass(frozen=True)
class CheckpointRecord:
    size: int
    time: float  # UNIX seconds when it was committed
    note: bytes  # the signed checkpoint note


class WriteTx(Protocol):
    """One open write transaction; it holds the log's single-writer lock until it ends."""

    async def latest(self) -> CheckpointRecord | None: ...

    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]: ...

    async def write(
        self, tiles: Mapping[TileKey, bytes], checkpoint: CheckpointRecord
    ) -> None: ...

    @property
    def handle(self) -> Any:
        """The backend's own connection, for callers that add rows to the same transaction."""
        ...


class LogStore(Protocol):
    async def read_tiles(self, keys: Sequence[TileKey]) -> dict[TileKey, bytes]: ...

    async def latest(self) -> CheckpointRecord | None: ...

    async def history(self, limit: int) -> list[CheckpointRecord]: ...

    async def get_meta(self, key: str) -> str | None: ...

    async def set_meta(self, key: str, value: str) -> None: ...

    def transaction(self) -> AbstractAsyncContextManager[WriteTx]: ...

    async def close(self) -> None: ...
