"""Storage backends for the log: a small async interface and its implementations."""

from ledger.storage.base import (
    CheckpointRecord,
    LogStore,
    StoreError,
    WitnessState,
    WriterBusyError,
    WriteTx,
)

__all__ = ["CheckpointRecord", "LogStore", "StoreError", "WitnessState", "WriteTx",
           "WriterBusyError"]
