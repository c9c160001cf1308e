"""The log's errors: why the writer refuses to sign, and why it takes no more appends."""

from __future__ import annotations

from ledger.core.errors import LedgerError


class LogIntegrityError(LedgerError, RuntimeError):
    """The stored tiles do not match the signed checkpoint: the log must not run."""


class LogRollbackError(LogIntegrityError):
    """The store holds a tree that is not an extension of one this process saw committed.

    A database restored from an older backup, or a failover that lost acknowledged commits,
    looks like this. Signing on top of it would fork the log (two checkpoints that no
    consistency proof links), so the writer refuses every batch until the store is back.
    """


class LogHaltedError(LogIntegrityError):
    """Appends are refused: damage was found in the stored log
    (:meth:`~ledger.log.sequencer.Sequencer.halt`)."""


class SequencerClosedError(LedgerError, RuntimeError):
    """The writer is closing or was never started: it takes no appends."""
