"""Storage backends for the log: a small async interface and its implementations."""

from ledger.storage.base import (
    CheckpointRecord,
    LogStore,
    StoreError,
    StoreUnavailableError,
    WitnessState,
    WriterBusyError,
    WriteTx,
)

__all__ = [
    "CheckpointRecord",
    "LogStore",
    "StoreError",
    "StoreUnavailableError",
    "WitnessState",
    "WriteTx",
    "WriterBusyError",
]
