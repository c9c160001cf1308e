"""The one error base of the ``ledger`` package.

Every error the ledger raises on purpose derives from :class:`LedgerError`, so a program using
the ledger as a library can catch all of them in one clause; each also keeps the builtin base
it always had (``ValueError`` for bad input, ``RuntimeError`` for a state that cannot go on),
so existing ``except ValueError`` code keeps working. It lives in ``core`` because the pure
code raises it too, and ``core`` depends on nothing else of the package. Refusals
(:class:`RefusedRequest`) are a separate kind: answers to a client, not failures.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["LedgerError", "RefusedRequest"]


class LedgerError(Exception):
    """LedgerError is the base of every error the ledger package raises deliberately."""


class RefusedRequest(Exception):
    """What a service refuses a client: an HTTP status, a stable machine-readable ``code``, a
    message for people, and headers the answer carries (``Retry-After``, a challenge).

    Services raise it (or a subclass naming one refusal) without knowing how it is sent; the
    HTTP layer renders every one as its JSON error (:func:`ledger.http.errors.error_response`).
    """

    def __init__(self, status: int, code: str, message: str,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
