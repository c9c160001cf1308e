"""Exit codes of the ``ledger`` and ``notary`` commands, and the one usage-error type.

Scripts branch on the exit status, so both commands share one table: 0 success, 1 a check ran and
failed (a verification level, an audit, an alarm), 2 the command could not do what was asked (bad
usage, unreadable input, a store that cannot be opened), 3 a remote party could not be reached or
read (the monitor's poll), 130 interrupted.
"""

from __future__ import annotations

from enum import IntEnum

from ledger.core.errors import LedgerError

__all__ = ["ExitCode", "UsageError"]


class ExitCode(IntEnum):
    """ExitCode is the status every command returns."""

    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    UNREACHABLE = 3
    INTERRUPTED = 130


class UsageError(LedgerError):
    """UsageError is an expected failure of a command: its message is all the user sees."""
