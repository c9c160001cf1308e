"""The trust anchors of a verification: receipt keys (JWKS), log keys, witness keys and quorum.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ledger.core.cosignature import parse_verifier_key
from ledger.core.note import Ed25519Verifier, NoteError, NoteVerifier
from ledger.core.tlog_policy import Policy as WitnessPolicy
from ledger.core.tlog_policy import PolicyError as TlogPolicyError
from ledger.core.tlog_policy import parse_policy as parse_tlog_policy
from notary.core.receipts import Jwks, JwksError
from notary.verifier.fetch import Fetcher, FetchError, _check_url, get_json
from notary.verifier.inputs import VerifierInputError, _object


@dataclass(frozen=True)
class Trust:
    """The verifier's trust anchors: receipt keys, log keys, and the witness policy.

    Witnesses come as a C2SP tlog-policy (``policy``: witnesses, groups, a quorum), or in the
    simple form ``witnesses`` with ``quorum`` (k of n distinct witnesses; 0 means no witness
    check). Log keys are matched to a receipt by origin (the key name).
    """

    jwks: Jwks | None = None
    log_keys: tuple[Ed25519Verifier, ...] = ()
    witnesses: tuple[NoteVerifier, ...] = ()
    quorum: int = 0
    policy: WitnessPolicy | None = None

    def __post_init__(self) -> None:
        if isinstance(self.quorum, bool) or not isinstance(self.quorum, int) or self.quorum < 0:
            raise VerifierInputError("the witness quorum must be a non-negative integer")
        if self.policy is not None and (self.witnesses or self.quorum):
            raise VerifierInputError("a witness policy replaces --witness and --quorum; give "
                                     "one or the other")
        try:
            WitnessPolicy.from_quorum(self.witnesses, self.quorum)
        except TlogPolicyError as e:
            raise VerifierInputError(str(e)) from None

    @property
    def witness_policy(self) -> WitnessPolicy | None:
        """The witness policy in force (the simple form turned into one), or None."""
        if self.policy is not None:
            return self.policy
        if not self.witnesses and not self.quorum:
            return None
        return WitnessPolicy.from_quorum(self.witnesses, self.quorum)

    @property
    def requires_witnesses(self) -> bool:
        policy = self.witness_policy
        return policy is not None and policy.requires_cosignatures


def load_witness_policy(path: str | Path) -> WitnessPolicy:
    """A C2SP tlog-policy file (``log``, ``witness``, ``group``, ``quorum`` lines)."""
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as e:
        raise VerifierInputError(f"cannot read the witness policy {path}: {e}") from e
    try:
        return parse_tlog_policy(data)
    except TlogPolicyError as e:
        raise VerifierInputError(f"the witness policy {path} is not valid: {e}") from e


def parse_witness_policy_text(text: str) -> WitnessPolicy:
    """A tlog-policy given as text (a tool argument of ``notary mcp``)."""
    try:
        return parse_tlog_policy(text)
    except TlogPolicyError as e:
        raise VerifierInputError(f"the witness policy is not valid: {e}") from e


def _expand_keys(values: Sequence[str]) -> list[str]:
    """Key texts from values that are keys or ``@FILE`` (one key a line, ``#`` comments)."""
    out: list[str] = []
    for value in values:
        if value.startswith("@"):
            try:
                text = Path(value[1:]).expanduser().read_text()
            except OSError as e:
                raise VerifierInputError(f"cannot read key file {value[1:]}: {e}") from e
            out.extend(line.strip() for line in text.splitlines()
                       if line.strip() and not line.lstrip().startswith("#"))
        else:
            out.append(value.strip())
    return out


def parse_log_keys(values: Sequence[str]) -> tuple[Ed25519Verifier, ...]:
    """Log verifier keys (``<origin>+<hex id>+<base64>``, type Ed25519) or ``@FILE``s of them."""
    keys = []
    for text in _expand_keys(values):
        try:
            keys.append(Ed25519Verifier.from_vkey(text))
        except NoteError as e:
            raise VerifierInputError(f"bad log key {text[:60]!r}: {e}") from e
    return tuple(keys)


def parse_witness_keys(values: Sequence[str]) -> tuple[NoteVerifier, ...]:
    """Witness verifier keys (cosignature/v1, or plain Ed25519) or ``@FILE``s of them."""
    keys = []
    for text in _expand_keys(values):
        try:
            keys.append(parse_verifier_key(text))
        except NoteError as e:
            raise VerifierInputError(f"bad witness key {text[:60]!r}: {e}") from e
    return tuple(keys)


def _jwks(doc: object, where: str) -> Jwks:
    try:
        jwks = Jwks(_object(doc, f"the JWKS from {where}"))
    except JwksError as e:
        raise VerifierInputError(f"the JWKS from {where} is unusable: {e}") from e
    if not len(jwks):
        raise VerifierInputError(f"the JWKS from {where} has no Ed25519 key")
    return jwks


async def load_jwks(value: str | Mapping[str, object], fetcher: Fetcher | None) -> Jwks:
    """Receipt keys from a JWKS document, a file (``FILE`` or ``@FILE``), or an http(s) URL.

    A URL needs ``fetcher``: offline, it is an input error rather than a silent skip.
    """
    if isinstance(value, Mapping):
        return _jwks(dict(value), "the arguments")
    if value.startswith(("http://", "https://")):
        if fetcher is None:
            raise VerifierInputError(f"the JWKS {value} is a URL, and offline nothing is fetched; "
                                     "pass a saved JWKS file")
        try:
            return _jwks(await get_json(fetcher, value), value)
        except FetchError as e:
            raise VerifierInputError(f"cannot fetch the JWKS: {e}") from e
    path = Path(value.removeprefix("@")).expanduser()
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise VerifierInputError(f"cannot read the JWKS file {path}: {e}") from e
    return _jwks(doc, str(path))


async def trust_from_notary(url: str, fetcher: Fetcher) -> tuple[Jwks, Ed25519Verifier]:
    """The receipt keys and log key a notary publishes (``/.well-known/jwks.json``, ``/v1/ledger``).

    This trusts that notary for its own keys (trust on first use): it proves the receipt is the
    notary's, not that the notary is the one you meant. Pin keys to verify independently.
    """
    base = url.rstrip("/")
    _check_url(base)
    try:
        jwks = _jwks(await get_json(fetcher, base + "/.well-known/jwks.json"), base)
        ledger = await get_json(fetcher, base + "/v1/ledger")
    except FetchError as e:
        raise VerifierInputError(f"cannot fetch the notary's keys: {e}") from e
    vkey = ledger.get("vkey") if isinstance(ledger, dict) else None
    if not isinstance(vkey, str):
        raise VerifierInputError(f"{base}/v1/ledger has no 'vkey'")
    return jwks, parse_log_keys([vkey])[0]
