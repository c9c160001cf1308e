"""The one error base of the ``ledger`` package.

Every error the ledger raises on purpose derives from :class:`LedgerError`, so a program using
the ledger as a library can catch all of them in one clause; each also keeps the builtin base
it always had (``ValueError`` for bad input, ``RuntimeError`` for a state that cannot go on),
so existing ``except ValueError`` code keeps working. It lives in ``core`` because the pure
code raises it too, and ``core`` depends on nothing else of the package. HTTP answers
(:class:`ledger.http.errors.ApiError`) are a separate kind: they are responses, not failures.
"""

from __future__ import annotations

__all__ = ["LedgerError"]


class LedgerError(Exception):
    """LedgerError is the base of every error the ledger package raises deliberately."""
