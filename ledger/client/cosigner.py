"""What the witness and mirror clients share: one error hierarchy, and C2SP tlog-witness's
``add-checkpoint`` (which a tlog-mirror serves too) posted to one cosigner.

Every outcome other than a verified cosignature is an exception, so a caller cannot mistake a
refusal for a success: :class:`CosignerConflict` carries the size the cosigner reported in a
409 (the caller retries with it), :class:`CosignerRefused` any other refusal or an answer the
spec does not allow, :class:`CosignerUnavailable` a transport failure, a timeout or a 5xx.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.client.http import FetchError, HttpAnswer, HttpClient
from ledger.core.errors import LedgerError
from ledger.core.witness_protocol import (
    SIZE_CONTENT_TYPE,
    ProtocolError,
    format_add_checkpoint,
    parse_size,
)

__all__ = ["CosignerConflict", "CosignerEndpoint", "CosignerError", "CosignerRefused",
           "CosignerUnavailable"]

_MAX_ANSWER = 64 * 1024


class CosignerError(LedgerError):
    """The witness (or mirror) did not cosign."""


class CosignerUnavailable(CosignerError):
    """No usable answer: connection refused or reset, timeout, or a 5xx."""


class CosignerRefused(CosignerError):
    """The cosigner refused (400, 403, 404, 422, …) or answered something the spec does not
    allow."""

    def __init__(self, status: int, message: str, role: str = "witness") -> None:
        super().__init__(f"{role} answered {status}: {message}")
        self.status = status


class CosignerConflict(CosignerError):
    """409: the cosigner's size for the origin is ``size``, not the ``old`` that was sent.

    When ``size`` equals the ``old`` that was sent, the 409 is the other kind: the cosigner
    already cosigned another root at this size, which a consistent log can never cause.
    """

    def __init__(self, size: int, sent_old: int, role: str = "witness") -> None:
        if size == sent_old:
            message = f"{role} holds another root at size {size}"
        else:
            message = f"{role} is at size {size}, not {sent_old}"
        super().__init__(message)
        self.size = size
        self.sent_old = sent_old

    @property
    def root_mismatch(self) -> bool:
        return self.size == self.sent_old


class CosignerEndpoint:
    """One cosigner's submission prefix URL, posted to with ``http`` (which carries the
    timeout); ``role`` ("witness", "mirror") names it in errors."""

    def __init__(self, url: str, http: HttpClient, role: str) -> None:
        self.url = url.rstrip("/")
        self.http = http
        self.role = role

    async def add_checkpoint(self, old: int, proof: Sequence[bytes], checkpoint: bytes
                             ) -> bytes:
        """POST ``add-checkpoint``; return the body of its 200 (the cosignature lines of a
        witness, nothing from a mirror), or raise (:class:`CosignerConflict` for a 409 that
        says the cosigner's size)."""
        answer = await self.post("/add-checkpoint", format_add_checkpoint(old, proof, checkpoint),
                                 {"Content-Type": "text/plain; charset=utf-8"})
        if answer.status == 200:
            return answer.body
        if answer.status == 409 and answer.content_type == SIZE_CONTENT_TYPE:
            try:
                size = parse_size(answer.body)
            except ProtocolError as e:
                raise self.refused(409, str(e)) from None
            raise CosignerConflict(size, old, self.role)
        raise self.refusal(answer.status, answer.body)

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> HttpAnswer:
        """POST ``body`` to ``path`` under the prefix: any answer (of at most 64 KiB), or
        :class:`CosignerUnavailable` when there is none."""
        try:
            return await self.http.request("POST", self.url + path, data=body,
                                           limit=_MAX_ANSWER, headers=headers)
        except FetchError as e:
            if e.status is not None:  # it answered, with far too much
                raise self.refused(e.status, "answer is too large") from None
            raise CosignerUnavailable(f"{self.url}: {e}") from None

    def refused(self, status: int, message: str) -> CosignerRefused:
        return CosignerRefused(status, message, self.role)

    def refusal(self, status: int, body: bytes) -> CosignerError:
        """The error for an answer that is neither a success nor one the caller handles."""
        message = body[:300].decode("utf-8", "replace").strip()
        if status >= 500:
            return CosignerUnavailable(f"{self.url}: {status} {message}")
        return self.refused(status, message)
