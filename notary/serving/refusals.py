"""What the notary refuses, as the HTTP layer renders it: each refusal a status and a code
(``{"error": {"code", "message"}}``), raised by the write and read paths of
:mod:`notary.serving.service`."""

from __future__ import annotations

from ledger.core.errors import RefusedRequest

__all__ = ["ClockAheadOfDatabase", "ClockBehindLog", "DigestConflict", "DigestTaken",
           "NotFound", "QuotaExceeded", "ServerNotAllowed", "ServiceRefusal", "StoreCorrupt",
           "Unauthorized", "store_corrupt", "withheld"]


class ServiceRefusal(RefusedRequest):
    """A refusal the HTTP layer renders as its JSON error (status and code per subclass); the
    service raises it knowing nothing of HTTP."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(type(self).status, type(self).code, message, headers)


class Unauthorized(ServiceRefusal):
    """401 with the RFC 6750 challenge, so clients know which scheme to use."""

    status, code = 401, "unauthorized"

    def __init__(self, message: str, *, invalid_token: bool = False) -> None:
        challenge = 'Bearer realm="notary"' + (', error="invalid_token"' if invalid_token else "")
        super().__init__(message, headers={"WWW-Authenticate": challenge})


class QuotaExceeded(ServiceRefusal):
    status, code = 429, "quota_exceeded"


class DigestConflict(ServiceRefusal):
    status, code = 409, "digest_conflict"


class ClockBehindLog(ServiceRefusal):
    """503: the log's latest ``issued_at`` is more than
    :data:`notary.serving.clock_guard.MAX_AHEAD` past this process's clock (another frontend's
    clock ran ahead, or this one's is behind). ``issued_at`` never decreases along the log, so
    a receipt issued now would carry that future time: refused."""

    status, code = 503, "clock_behind_log"


class ClockAheadOfDatabase(ServiceRefusal):
    """503: this process's clock is more than :data:`notary.serving.clock_guard.MAX_AHEAD` ahead
    of the database server's (PostgreSQL, which every frontend shares): its receipts would
    carry a time in the future of the others', and pin ``issued_at`` for them. Refused until
    the clock is fixed."""

    status, code = 503, "clock_ahead_of_database"


class NotFound(ServiceRefusal):
    status, code = 404, "not_found"


class DigestTaken(ServiceRefusal):
    """409: the digest is logged under another account. Its receipt is that account's and is
    never handed to another as its own (docs/design.md, "One digest, one receipt"); a caller
    that salts each record freshly never meets this."""

    status, code = 409, "digest_taken"

    def __init__(self) -> None:
        super().__init__("this call_sha256 was notarized by another account; its receipt is "
                         "not this key's (salt each call record freshly)")


class ServerNotAllowed(ServiceRefusal):
    """403: the server name, or one confusable with it, belongs to another account (the first
    account to notarize under a name holds it; the operator grants and moves names)."""

    status, code = 403, "server_not_allowed"


class StoreCorrupt(ServiceRefusal):
    """Writes are stopped: damage was found in the stored log (the scrub, or a damaged page)."""

    status, code = 503, "store_corrupt"


def store_corrupt(reason: str) -> StoreCorrupt:
    return StoreCorrupt(f"writes are stopped: the stored log is damaged ({reason}); the "
                        "operator must restore the newest backup and run `notary check`")


def withheld() -> DigestConflict:
    return DigestConflict("this call_sha256 was notarized already, but its receipt is withheld "
                          "(it could not be recovered when the store was migrated)")
