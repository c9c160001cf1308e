"""The trust anchors of a verification: receipt keys (JWKS), log keys, witness keys and quorum.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ledger.client.http import FetchError, HttpClient
from ledger.core.boundedjson import JsonError
from ledger.core.cosignature import LogVerifier, parse_log_key, parse_verifier_key
from ledger.core.note import NoteError, NoteVerifier
from ledger.core.tlog_policy import TlogPolicy, TlogPolicyError, parse_tlog_policy
from notary.core.jwks import Jwks, JwksError
from notary.verifier.inputs import VerifierInputError, _object, check_http_url, parse_input_json


@dataclass(frozen=True)
class Retirement:
    """A log whose keys were retired by an emergency roll (docs/lifecycle.md): a receipt of
    it is valid only when its checkpoint is consistent with the log's final checkpoint."""

    origin: str
    final_size: int
    at: str
    by: str

    def reason(self) -> str:
        return (f"the keys of log {self.origin!r} were retired by the compromised roll that "
                f"froze {self.by!r} at {self.at}: a receipt of it is valid only when its "
                f"checkpoint is consistent with the log's final checkpoint (size "
                f"{self.final_size})")


def retirements(ledger: object) -> dict[str, Retirement]:
    """The retired logs of a ``/v1/ledger`` document's ``logs`` (entries not well formed are
    left out: a retirement only ever makes a verdict stricter)."""
    logs = ledger.get("logs") if isinstance(ledger, dict) else None
    out: dict[str, Retirement] = {}
    for entry in logs if isinstance(logs, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("retired"), dict):
            continue
        retired, origin, size = entry["retired"], entry.get("origin"), entry.get("size")
        if isinstance(origin, str) and isinstance(size, int) and not isinstance(size, bool):
            out[origin] = Retirement(origin, size, str(retired.get("at")),
                                     str(retired.get("by")))
    return out


async def notary_retirements(url: str, fetcher: HttpClient) -> dict[str, Retirement]:
    """The retired logs the notary at ``url`` lists (none when it cannot be asked)."""
    try:
        return retirements(await fetcher.get_json(url.rstrip("/") + "/v1/ledger"))
    except FetchError:
        return {}


@dataclass(frozen=True)
class Trust:
    """The verifier's trust anchors: receipt keys, log keys, and the witness policy.

    Witnesses come as a C2SP tlog-policy (``policy``: witnesses, groups, a quorum), or in the
    simple form ``witnesses`` with ``quorum`` (k of n distinct witnesses; 0 means no witness
    check). Log keys are matched to a receipt by origin (the key name). The policy's ``log``
    lines are log keys too, pinned like ``log_keys`` (joined to them here, as the JavaScript
    ``makeTrust`` does), so a policy naming several logs of a notary that rolled verifies
    receipts of each of them on its own.
    """

    jwks: Jwks | None = None
    log_keys: tuple[LogVerifier, ...] = ()
    witnesses: tuple[NoteVerifier, ...] = ()
    quorum: int = 0
    policy: TlogPolicy | None = None
    retired: Mapping[str, Retirement] = field(default_factory=dict)
    """Logs whose keys a compromised roll retired, by origin (the notary's log list)."""

    def __post_init__(self) -> None:
        if isinstance(self.quorum, bool) or not isinstance(self.quorum, int) or self.quorum < 0:
            raise VerifierInputError("the witness quorum must be a non-negative integer")
        if self.policy is not None and (self.witnesses or self.quorum):
            raise VerifierInputError("a witness policy replaces --witness and --quorum; give "
                                     "one or the other")
        try:
            TlogPolicy.from_quorum(self.witnesses, self.quorum)
        except TlogPolicyError as e:
            raise VerifierInputError(str(e)) from None
        object.__setattr__(self, "log_keys", with_policy_logs(self.log_keys, self.policy))

    @property
    def witness_policy(self) -> TlogPolicy | None:
        """The witness policy in force (the simple form turned into one), or None."""
        if self.policy is not None:
            return self.policy
        if not self.witnesses and not self.quorum:
            return None
        return TlogPolicy.from_quorum(self.witnesses, self.quorum)

    @property
    def requires_witnesses(self) -> bool:
        policy = self.witness_policy
        return policy is not None and policy.requires_cosignatures


def with_policy_logs(keys: Sequence[LogVerifier], policy: TlogPolicy | None
                     ) -> tuple[LogVerifier, ...]:
    """``keys`` and then the keys of the policy's ``log`` lines not among them: one set of
    pinned log keys (docs/verifying.md), which the notary's own keys never add to."""
    out = tuple(keys)
    if policy is not None:
        out += tuple(k for k, _ in policy.logs if all(k.vkey != h.vkey for h in out))
    return out


def load_witness_policy(path: str | Path) -> TlogPolicy:
    """A C2SP tlog-policy file (``log``, ``witness``, ``group``, ``quorum`` lines)."""
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as e:
        raise VerifierInputError(f"cannot read the witness policy {path}: {e}") from e
    try:
        return parse_tlog_policy(data)
    except TlogPolicyError as e:
        raise VerifierInputError(f"the witness policy {path} is not valid: {e}") from e


def parse_witness_policy_text(text: str) -> TlogPolicy:
    """A tlog-policy given as text (a tool argument of ``notary mcp``)."""
    try:
        return parse_tlog_policy(text)
    except TlogPolicyError as e:
        raise VerifierInputError(f"the witness policy is not valid: {e}") from e


def distinct_witnesses(witnesses: Sequence[NoteVerifier]) -> int:
    """How many different witnesses the keys name: a key listed twice still counts once, under
    another name too (cosignature/v1 does not commit to the name), as in the witness policy."""
    return len(TlogPolicy.from_quorum(witnesses, 0).witnesses)


def build_trust(jwks: Jwks | None, log_keys: Sequence[LogVerifier],
                witnesses: Sequence[NoteVerifier], quorum: int | None) -> Trust:
    """The one way every entry point (CLI flags, ``notary mcp`` arguments, gateway audit) turns
    keys into trust anchors, so a quorum means the same everywhere.

    ``quorum`` None asks for every distinct witness given (0 when none is).
    """
    if quorum and not witnesses:
        raise VerifierInputError("a witness quorum needs witness keys (--witness)")
    k = distinct_witnesses(witnesses) if quorum is None else quorum
    return Trust(jwks, tuple(log_keys), tuple(witnesses), k)


async def complete_from_notary(jwks: Jwks | None, log_keys: Sequence[LogVerifier],
                               notary_url: str | None, fetcher: HttpClient | None
                               ) -> tuple[Jwks | None, tuple[LogVerifier, ...], bool]:
    """(jwks, log keys, fetched): pinned keys, with only what is missing filled in from the
    notary's own (trust on first use, see :func:`trust_from_notary`).

    Nothing is fetched when both kinds are pinned, no notary is named, or ``fetcher`` is None
    (offline); ``fetched`` says whether the notary was asked.
    """
    keys = tuple(log_keys)
    if (jwks is not None and keys) or notary_url is None or fetcher is None:
        return jwks, keys, False
    notary_jwks, notary_keys = await trust_from_notary(notary_url, fetcher)
    return (jwks if jwks is not None else notary_jwks), (keys or notary_keys), True


_BLANK = " \t\r\n"
"""What is trimmed around a key text: ASCII blanks only, as the JavaScript CLI does (Unicode's
other spaces, a BOM among them, are left for the key parser to refuse in both)."""
_LINE = re.compile(r"\r\n|\r|\n")


def _key_file_lines(path: str) -> list[str]:
    """The lines of a key file: UTF-8 without a BOM, split at CR, LF or CRLF only."""
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as e:
        raise VerifierInputError(f"cannot read key file {path}: {e}") from e
    if data.startswith(b"\xef\xbb\xbf"):
        raise VerifierInputError(f"the key file {path} starts with a byte order mark (BOM); "
                                 "write it as UTF-8 without one")
    try:
        return _LINE.split(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise VerifierInputError(f"the key file {path} is not UTF-8 (invalid byte at offset "
                                 f"{e.start})") from None


def _expand_keys(values: Sequence[str]) -> list[str]:
    """Key texts from values that are keys or ``@FILE`` (one key a line, ``#`` comments)."""
    out: list[str] = []
    for value in values:
        if value.startswith("@"):
            lines = (line.strip(_BLANK) for line in _key_file_lines(value[1:]))
            out.extend(line for line in lines if line and not line.startswith("#"))
        else:
            out.append(value.strip(_BLANK))
    return out


def parse_log_keys(values: Sequence[str]) -> tuple[LogVerifier, ...]:
    """Log verifier keys (``<origin>+<hex id>+<base64>``, Ed25519 or ML-DSA-44) or ``@FILE``s
    of them."""
    keys = []
    for text in _expand_keys(values):
        try:
            keys.append(parse_log_key(text))
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


async def load_jwks(value: str | Mapping[str, object], fetcher: HttpClient | None) -> Jwks:
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
            return _jwks(await fetcher.get_json(value), value)
        except FetchError as e:
            raise VerifierInputError(f"cannot fetch the JWKS: {e}") from e
    path = Path(value.removeprefix("@")).expanduser()
    try:
        doc = parse_input_json(path.read_bytes())
    except (OSError, JsonError) as e:
        raise VerifierInputError(f"cannot read the JWKS file {path}: {e}") from e
    return _jwks(doc, str(path))


async def trust_from_notary(url: str, fetcher: HttpClient
                            ) -> tuple[Jwks, tuple[LogVerifier, ...]]:
    """The receipt keys and log keys a notary publishes (``/.well-known/jwks.json``,
    ``/v1/ledger``: the active log's ``vkey``, then every log's Ed25519 key in ``logs``, so
    that a receipt of a log frozen since is verified under its own log's key).

    This trusts that notary for its own keys (trust on first use): it proves the receipt is the
    notary's, not that the notary is the one you meant. Pin keys to verify independently.
    """
    base = url.rstrip("/")
    check_http_url(base)
    try:
        jwks = _jwks(await fetcher.get_json(base + "/.well-known/jwks.json"), base)
        ledger = await fetcher.get_json(base + "/v1/ledger")
    except FetchError as e:
        raise VerifierInputError(f"cannot fetch the notary's keys: {e}") from e
    vkey = ledger.get("vkey") if isinstance(ledger, dict) else None
    if not isinstance(vkey, str):
        raise VerifierInputError(f"{base}/v1/ledger has no 'vkey'")
    return jwks, parse_log_keys(list(dict.fromkeys([vkey, *_log_list_keys(ledger)])))


def _log_list_keys(ledger: object) -> list[str]:
    """The first (Ed25519) verifier key of each log in ``/v1/ledger``'s ``logs``."""
    logs = ledger.get("logs") if isinstance(ledger, dict) else None
    out: list[str] = []
    for entry in logs if isinstance(logs, list) else []:
        vkeys = entry.get("vkeys") if isinstance(entry, dict) else None
        if isinstance(vkeys, list) and vkeys and isinstance(vkeys[0], str):
            out.append(vkeys[0])
    return out
