"""rs-tool-call/1 call records and ``call_sha256`` (pure, no I/O).

A call record binds one tool call: which server, which tool, the arguments exactly as
received, the final result exactly as returned (without ``_meta``), and a fresh salt. Only
its SHA-256 ever leaves the server; anyone later shown the record can recompute the digest
and compare it with the one in the receipt and the log. The salt keeps the digest from
being brute-forced when arguments and results are guessable.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from notary.core.canonical import canonical_json, check_js_safe, child_path
from notary.core.errors import NotaryBaseError

__all__ = [
    "MAX_NAME_CHARS",
    "SALT_MIN_BYTES",
    "SPEC",
    "CallRecord",
    "RecordError",
    "hashed_result",
    "is_final",
    "name_problem",
    "new_salt",
    "record_from_json",
]

SPEC = "rs-tool-call/1"

SALT_MIN_BYTES = 16
"""The spec asks for at least 16 fresh random bytes per call."""

MAX_NAME_CHARS = 256
"""Longest server or tool name accepted (keeps every log entry far below 65,535 bytes)."""

# Lower-case only: the salt is hashed as the exact string, and conforming producers
# (secrets.token_hex, Node's Buffer.toString("hex"), Go's hex.EncodeToString) all write
# lower case. Refusing upper case keeps one spelling per salt, like call_sha256 itself.
_SALT_RE = re.compile(rf"(?:[0-9a-f]{{2}}){{{SALT_MIN_BYTES},}}")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

_RECORD_KEYS = frozenset({"spec", "server", "tool", "arguments", "result", "salt"})


class RecordError(NotaryBaseError, ValueError):
    """A call record is malformed; ``path`` names the offending member (``$.salt``)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


def new_salt() -> str:
    """A fresh salt: 16 CSPRNG bytes as 32 lower-case hex characters."""
    return secrets.token_hex(SALT_MIN_BYTES)


def name_problem(value: object) -> str | None:
    """Why ``value`` is not an acceptable server or tool name, or None if it is.

    Names go into the record, the log entry and the receipt, so they must be non-empty
    strings of at most :data:`MAX_NAME_CHARS` characters that encode as UTF-8.
    """
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > MAX_NAME_CHARS:
        return f"is {len(value)} characters long; at most {MAX_NAME_CHARS} are allowed"
    if _SURROGATE_RE.search(value):
        return "contains a lone surrogate (not valid Unicode)"
    return None


def _check_name(value: object, path: str) -> None:
    problem = name_problem(value)
    if problem is not None:
        raise RecordError(path, problem)


def hashed_result(result: Mapping[str, object]) -> dict[str, object]:
    """The part of an MCP ``CallToolResult`` (wire JSON, camelCase) that is hashed.

    ``{content, structuredContent?, isError?}``: ``content`` is required and must be a
    list. ``structuredContent`` may be any JSON value (MCP 2026-07-28, SEP-2106: object,
    array, string, number, boolean or ``null``) and is hashed exactly as sent: present
    with ``null`` is hashed as ``null``, and only a result without the member leaves it
    out, as a JavaScript JCS of the same wire JSON does. ``isError`` is a boolean, left
    out when absent (or ``null``, which no schema allows and the SDKs read as absent).
    ``resultType`` and ``_meta`` (and anything else) are not part of the commitment: the
    SDK adds ``_meta`` *after* hashing, and protocol versions differ on ``resultType``.
    The values are kept exactly as given. Raises :class:`RecordError` with paths under
    ``$.result``.
    """
    if not isinstance(result, Mapping):
        raise RecordError("$.result", f"must be an object, not {type(result).__name__}")
    if "content" not in result:
        raise RecordError("$.result.content", "is required (a list of content blocks)")
    content = result["content"]
    if not isinstance(content, list):
        raise RecordError("$.result.content", f"must be a list, not {type(content).__name__}")
    out: dict[str, object] = {"content": content}
    if "structuredContent" in result:
        out["structuredContent"] = result["structuredContent"]
    is_error = result.get("isError")
    if is_error is not None:
        if not isinstance(is_error, bool):
            raise RecordError(
                "$.result.isError", f"must be a boolean, not {type(is_error).__name__}"
            )
        out["isError"] = is_error
    return out


def is_final(result: Mapping[str, object]) -> bool:
    """Whether a result may be notarized: ``resultType`` absent/None or ``"complete"``.

    An ``input_required`` result asks the client for more and is not the call's outcome.
    """
    result_type = result.get("resultType")
    return result_type is None or result_type == "complete"


@dataclass(frozen=True)
class CallRecord:
    """One rs-tool-call/1 call record; validated on construction.

    ``arguments`` must be a dict (``{}`` when the call had none); ``result`` is the MCP
    result as wire JSON and must be final (see :func:`is_final`); ``salt`` is lower-case
    hex of at least 16 bytes. Every value must pass
    :func:`notary.core.canonical.check_js_safe`, so :meth:`canonical_bytes` cannot fail later.
    Raises :class:`RecordError`, or ``CanonicalizationError`` (path within the record, e.g.
    ``$.arguments.x``) for values JavaScript cannot represent.
    """

    server: str
    tool: str
    arguments: Mapping[str, object]
    result: Mapping[str, object]
    salt: str

    def __post_init__(self) -> None:
        _check_name(self.server, "$.server")
        _check_name(self.tool, "$.tool")
        if not isinstance(self.arguments, dict):
            raise RecordError(
                "$.arguments",
                f"must be a JSON object (dict), not {type(self.arguments).__name__}; "
                "use {} when the call had no arguments",
            )
        if not isinstance(self.salt, str):
            raise RecordError("$.salt", f"must be a string, not {type(self.salt).__name__}")
        if _SALT_RE.fullmatch(self.salt) is None:
            raise RecordError(
                "$.salt",
                f"must be lower-case hex of at least {SALT_MIN_BYTES} bytes "
                f"({2 * SALT_MIN_BYTES}+ characters, even length)",
            )
        if not isinstance(self.result, Mapping):
            raise RecordError("$.result", f"must be an object, not {type(self.result).__name__}")
        if not is_final(self.result):
            raise RecordError(
                "$.result.resultType",
                f"{self.result.get('resultType')!r} is not final; only results with "
                "resultType absent or 'complete' are notarized",
            )
        check_js_safe(self.to_json())

    def to_json(self) -> dict[str, object]:
        """The hashed document ``{spec, server, tool, arguments, result, salt}``.

        ``result`` is reduced by :func:`hashed_result`. Feeding this back to
        :func:`record_from_json` gives an equal digest.
        """
        return {
            "spec": SPEC,
            "server": self.server,
            "tool": self.tool,
            "arguments": self.arguments,
            "result": hashed_result(self.result),
            "salt": self.salt,
        }

    def canonical_bytes(self) -> bytes:
        """The JCS bytes that ``call_sha256`` is computed over; made once per record (a
        record, checked whole when built, is not changed after: the gateway describes the
        record the notarizer hashed without encoding it again)."""
        made: bytes | None = self.__dict__.get("_jcs")
        if made is None:
            made = canonical_json(self.to_json())
            object.__setattr__(self, "_jcs", made)
        return made

    def call_sha256(self) -> str:
        """Lower-case hex SHA-256 of :meth:`canonical_bytes`."""
        return hashlib.sha256(self.canonical_bytes()).hexdigest()


def _string_member(fields: Mapping[str, object], key: str) -> str:
    value = fields[key]
    if not isinstance(value, str):
        raise RecordError(f"$.{key}", f"must be a string, not {type(value).__name__}")
    return value


def record_from_json(obj: Mapping[str, object], *, server: str | None = None) -> CallRecord:
    """Build a :class:`CallRecord` from its JSON form ``{server, tool, arguments, result, salt}``.

    Used by ``notary hash RECORD.json`` and the verify endpoint. ``spec`` is optional but
    must equal ``rs-tool-call/1`` when present; unknown members are refused (a typo such as
    ``argument`` would otherwise silently hash a different record); ``arguments`` is
    required. ``server`` fills in a record that omits it (the rs-tool-call/1 verify example
    sends only tool, arguments, result and salt, since the receipt names the server); a
    ``server`` inside the record wins.
    """
    if not isinstance(obj, Mapping):
        raise RecordError("$", f"a call record must be an object, not {type(obj).__name__}")
    unknown = sorted(str(k) for k in obj if k not in _RECORD_KEYS)
    if unknown:
        raise RecordError(
            child_path("$", unknown[0]),
            f"unknown member(s) {unknown}; expected {sorted(_RECORD_KEYS)}",
        )
    if "spec" in obj and obj["spec"] != SPEC:
        raise RecordError("$.spec", f"must be {SPEC!r}, got {obj['spec']!r}")
    fields = dict(obj)
    if "server" not in fields and server is not None:
        fields["server"] = server
    for key in ("server", "tool", "arguments", "result", "salt"):
        if key not in fields:
            raise RecordError(f"$.{key}", "is required")
    record_server = _string_member(fields, "server")
    tool = _string_member(fields, "tool")
    salt = _string_member(fields, "salt")
    arguments = fields["arguments"]
    if not isinstance(arguments, dict):
        raise RecordError("$.arguments", f"must be an object, not {type(arguments).__name__}")
    result = fields["result"]
    if not isinstance(result, Mapping):
        raise RecordError("$.result", f"must be an object, not {type(result).__name__}")
    return CallRecord(
        server=record_server, tool=tool, arguments=arguments, result=result, salt=salt
    )
