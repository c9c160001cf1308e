"""Storage backends for the log: a small async interface and its implementations."""

from .base import CheckpointRecord, LogStore, StoreError, WriteTx, WriterBusyError

__all__ = ["CheckpointRecord", "LogStore", "StoreError", "WriteTx", "WriterBusyError"]
