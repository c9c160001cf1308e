"""How the witnessing job is configured: its witnesses and mirrors (``URL=VKEY`` specs, or a
C2SP tlog-policy's witness lines) as submission endpoints (:mod:`ledger.jobs.witnessing`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ledger.core.cosignature import CosignatureVerifier, WitnessVerifier, parse_witness_key
from ledger.core.errors import LedgerError
from ledger.core.note import NoteError, NoteVerifier
from ledger.core.subtree_cosignature import SubtreeCosignatureVerifier
from ledger.core.tlog_policy import TlogPolicy

__all__ = [
    "WitnessConfigError",
    "WitnessEndpoint",
    "endpoints_from_policy",
    "parse_mirror_spec",
    "parse_witness_spec",
    "public_key",
]


class WitnessConfigError(LedgerError, ValueError):
    """WitnessConfigError is a witness configuration that cannot work (bad spec, quorum, timing)."""


@dataclass(frozen=True)
class WitnessEndpoint:
    """A cosigner as the notary is configured with it: submission prefix and verifier key;
    ``mirror`` when it is a tlog-mirror (pushed the entries too, not just the checkpoint)."""

    url: str
    verifier: WitnessVerifier
    mirror: bool = False

    @property
    def vkey(self) -> str:
        return self.verifier.vkey


def public_key(verifier: NoteVerifier) -> bytes:
    key = getattr(verifier, "public_key", None)
    if not isinstance(key, bytes):
        raise WitnessConfigError(f"witness key {verifier.name!r} has no Ed25519 public key")
    return key


def endpoints_from_policy(policy: TlogPolicy, mirrors: Sequence[WitnessEndpoint] = ()
                          ) -> list[WitnessEndpoint]:
    """The witnesses of a C2SP tlog-policy as submission endpoints (each needs its URL), and
    the ``mirrors`` given beside it.

    A ``witness`` line whose key is one of the mirrors' is that mirror (counted by the policy,
    pushed as a mirror): its URL may be left out, and if given must be the mirror's URL.
    Mirrors the policy does not name come last: pushed, but not counted.
    """
    by_key = {public_key(m.verifier): m for m in mirrors}
    out = []
    for name, (verifier, url) in policy.witnesses.items():
        mirror = by_key.pop(public_key(verifier), None) if isinstance(
            verifier, CosignatureVerifier | SubtreeCosignatureVerifier) else None
        if mirror is not None:
            if url is not None and url.rstrip("/") != mirror.url:
                raise WitnessConfigError(f"witness {name!r} in the witness policy has the key "
                                         f"of the mirror {mirror.url} but the URL {url!r}")
            out.append(mirror)
            continue
        if url is None:
            raise WitnessConfigError(f"witness {name!r} in the witness policy has no URL (the "
                                     "log submits to it: write 'witness NAME VKEY URL')")
        if not url.startswith(("http://", "https://")):
            raise WitnessConfigError(f"witness {name!r}: {url!r} is not an http(s) URL")
        if not isinstance(verifier, CosignatureVerifier | SubtreeCosignatureVerifier):
            raise WitnessConfigError(f"witness {name!r} needs a cosignature/v1 or ML-DSA-44 "
                                     "subtree/v1 key")
        out.append(WitnessEndpoint(url.rstrip("/"), verifier))
    return out + list(by_key.values())


def parse_witness_spec(text: str, *, mirror: bool = False) -> WitnessEndpoint:
    """``URL=VKEY``. Either side may contain ``=`` (base64 padding, query strings), so every
    split point is tried and the first whose right side is a witness vkey (cosignature/v1 or
    ML-DSA-44) wins."""
    kind = "mirror" if mirror else "witness"
    for i, ch in enumerate(text):
        if ch != "=":
            continue
        url, vkey = text[:i], text[i + 1 :]
        try:
            verifier = parse_witness_key(vkey)
        except NoteError:
            continue
        if not url.startswith(("http://", "https://")):
            break
        return WitnessEndpoint(url.rstrip("/"), verifier, mirror)
    raise WitnessConfigError(f"{kind} {text!r}: want URL=VKEY (an http(s) URL and a "
                             f"cosignature/v1 or ML-DSA-44 {kind} verifier key)")


def parse_mirror_spec(text: str) -> WitnessEndpoint:
    """``URL=VKEY`` of a tlog-mirror: its submission prefix and cosignature verifier key (a
    mirror's keys are a witness's kinds), split as :func:`parse_witness_spec` does."""
    return parse_witness_spec(text, mirror=True)
