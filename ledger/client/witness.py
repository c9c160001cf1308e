"""A tlog-witness client: submit a checkpoint to one witness and get its verified cosignature.

Used by the notary's witnessing task, the tests and the benchmark. Every outcome other than a
verified cosignature is an exception, so a caller cannot mistake a refusal for a success:
:class:`WitnessConflict` carries the size the witness reported in a 409 (the caller retries
with it), :class:`WitnessRefused` any other refusal, :class:`WitnessUnavailable` a transport
failure or timeout.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.client.http import FetchError, HttpClient
from ledger.core.cosignature import CosignatureVerifier
from ledger.core.errors import LedgerError
from ledger.core.note import NoteError, NoteSignature, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureVerifier
from ledger.core.witness_protocol import (
    SIZE_CONTENT_TYPE,
    ProtocolError,
    format_add_checkpoint,
    parse_size,
    verify_cosignatures,
)

__all__ = [
    "WitnessClient",
    "WitnessConflict",
    "WitnessError",
    "WitnessRefused",
    "WitnessUnavailable",
]

_MAX_ANSWER = 64 * 1024


class WitnessError(LedgerError):
    """The witness did not cosign."""


class WitnessUnavailable(WitnessError):
    """No usable answer: connection refused or reset, timeout, or a 5xx."""


class WitnessRefused(WitnessError):
    """The witness refused the checkpoint (400, 403, 404, 422, …) or answered nonsense."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"witness answered {status}: {message}")
        self.status = status


class WitnessConflict(WitnessError):
    """409: the witness's size for the origin is ``size``, not the ``old`` that was sent.

    When ``size`` equals the ``old`` that was sent, the 409 is the other kind: the witness
    already cosigned another root at this size, which a consistent log can never cause.
    """

    def __init__(self, size: int, sent_old: int) -> None:
        if size == sent_old:
            message = f"witness holds another root at size {size}"
        else:
            message = f"witness is at size {size}, not {sent_old}"
        super().__init__(message)
        self.size = size
        self.sent_old = sent_old

    @property
    def root_mismatch(self) -> bool:
        return self.size == self.sent_old


class WitnessClient:
    """One witness: its submission prefix URL and its cosignature verifier key."""

    def __init__(self, url: str, verifier: CosignatureVerifier | SubtreeCosignatureVerifier,
                 http: HttpClient) -> None:
        """``http`` carries the timeout; a witness answers in well under a second."""
        self.url = url.rstrip("/")
        self.verifier = verifier
        self.http = http

    async def add_checkpoint(self, old: int, proof: Sequence[bytes], checkpoint: bytes
                             ) -> list[NoteSignature]:
        """POST the checkpoint; return the witness's verified cosignature line(s) on it."""
        text = parse_note(checkpoint).text
        body = format_add_checkpoint(old, proof, checkpoint)
        try:
            answer = await self.http.request(
                "POST", self.url + "/add-checkpoint", data=body, limit=_MAX_ANSWER,
                headers={"Content-Type": "text/plain; charset=utf-8"})
        except FetchError as e:
            if e.status is not None:  # it answered, with far too much
                raise WitnessRefused(e.status, "answer is too large") from None
            raise WitnessUnavailable(f"{self.url}: {e}") from None
        status, ctype = answer.status, answer.content_type
        if status == 200:
            try:
                return verify_cosignatures(text, answer.body, [self.verifier])
            except (ProtocolError, NoteError) as e:
                raise WitnessRefused(200, f"no valid cosignature by {self.verifier.name}: {e}"
                                     ) from None
        if status == 409 and ctype == SIZE_CONTENT_TYPE:
            try:
                raise WitnessConflict(parse_size(answer.body), old)
            except ProtocolError as e:
                raise WitnessRefused(409, str(e)) from None
        message = answer.body[:300].decode("utf-8", "replace").strip()
        if status >= 500:
            raise WitnessUnavailable(f"{self.url}: {status} {message}")
        raise WitnessRefused(status, message)
