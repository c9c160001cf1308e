"""The one error base of the ``notary`` package.

Every error the notary raises on purpose derives from :class:`NotaryBaseError`, so a program can
catch all of them in one clause; each also keeps its builtin base (mostly ``ValueError``).
:class:`notary.sdk.NotaryError` is a different, narrower thing, kept by that name for the SDK's
users: a call to a notary service failed. Errors of the ledger underneath derive from
:class:`ledger.core.errors.LedgerError`, and HTTP answers (``ApiError``) are responses, not
members of either family.
"""

from __future__ import annotations

__all__ = ["NotaryBaseError"]


class NotaryBaseError(Exception):
    """NotaryBaseError is the base of every error the notary package raises deliberately."""
