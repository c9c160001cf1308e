"""A tlog-witness client: submit a checkpoint to one witness and get its verified cosignature.

Used by the notary's witnessing task, the tests and the benchmark. Every outcome other than a
verified cosignature is an exception (:mod:`ledger.client.cosigner`): :class:`WitnessConflict`
carries the size the witness reported in a 409 (the caller retries with it),
:class:`WitnessRefused` any other refusal, :class:`WitnessUnavailable` a transport failure or
timeout. The ``Witness…`` names are those of the one hierarchy the mirror client raises too.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.client.cosigner import (
    CosignerConflict,
    CosignerEndpoint,
    CosignerError,
    CosignerRefused,
    CosignerUnavailable,
)
from ledger.client.http import HttpClient
from ledger.core.cosignature import CosignatureVerifier
from ledger.core.note import NoteError, NoteSignature, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureVerifier
from ledger.core.witness_protocol import ProtocolError, verify_cosignatures

__all__ = [
    "WitnessClient",
    "WitnessConflict",
    "WitnessError",
    "WitnessRefused",
    "WitnessUnavailable",
]

WitnessError = CosignerError
WitnessUnavailable = CosignerUnavailable
WitnessRefused = CosignerRefused
WitnessConflict = CosignerConflict


class WitnessClient:
    """One witness: its submission prefix URL and its cosignature verifier key."""

    def __init__(self, url: str, verifier: CosignatureVerifier | SubtreeCosignatureVerifier,
                 http: HttpClient) -> None:
        """``http`` carries the timeout; a witness answers in well under a second."""
        self.endpoint = CosignerEndpoint(url, http, "witness")
        self.url = self.endpoint.url
        self.http = http
        self.verifier = verifier

    async def add_checkpoint(self, old: int, proof: Sequence[bytes], checkpoint: bytes
                             ) -> list[NoteSignature]:
        """POST the checkpoint; return the witness's verified cosignature line(s) on it."""
        text = parse_note(checkpoint).text
        body = await self.endpoint.add_checkpoint(old, proof, checkpoint)
        try:
            return verify_cosignatures(text, body, [self.verifier])
        except (ProtocolError, NoteError) as e:
            raise WitnessRefused(200, f"no valid cosignature by {self.verifier.name}: {e}"
                                 ) from None
