"""What the gateway answers of its own accord: a refusal (an ``isError`` tool result), the
generic denial of a prompt or resource request (a JSON-RPC error), and small readers of the
answers that pass through.

A refusal carries only its code in ``_meta[authorization-error]``: the reason a policy gave is
the operator's (it goes to the log), never the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import mcp_types as types
from mcp.shared.exceptions import MCPError

from notary.gateway import codes

MAX_KEY_CHARS: Final = 255
"""The longest idempotency key or agent name the gateway takes from ``_meta``."""

DENIED: Final = "this call is not authorized by the gateway's policy"
UNRECORDED: Final = "the authorization could not be recorded; nothing was forwarded"

def denial_error(code: str = codes.AUTHORIZATION_DENIED) -> MCPError:
    """The one error a denied (or unrecordable) non-tool request gets: the code, no reason."""
    message = ("this request is not authorized by the gateway's policy"
               if code == codes.AUTHORIZATION_DENIED else UNRECORDED)
    return MCPError(code=types.INVALID_PARAMS, message=f"{code}: {message}",
                    data={codes.AUTH_ERROR_META_KEY: {"code": code}})


def _text(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def meta_of(result: Mapping[str, object]) -> Mapping[str, object]:
    """``result``'s ``_meta`` object ({} when it has none)."""
    meta = result.get("_meta")
    return meta if isinstance(meta, Mapping) else {}


def items(value: object) -> list[object]:
    """A list member of an upstream answer (anything else, null or absent: no items)."""
    return value if isinstance(value, list) else []


def refusal(code: str, message: str, extra_meta: Mapping[str, object] | None = None
            ) -> dict[str, object]:
    """An ``isError`` result carrying only ``code`` in ``_meta[authorization-error]``."""
    meta: dict[str, object] = dict(extra_meta or {})
    meta[codes.AUTH_ERROR_META_KEY] = {"code": code}
    return {"content": _text(f"{code}: {message}"), "isError": True, "_meta": meta}


def string_meta(meta: Mapping[str, object] | None, key: str) -> str | None:
    """A short printable string under ``key`` of a request's ``_meta`` (else None)."""
    value = meta.get(key) if meta is not None else None
    if isinstance(value, str) and 0 < len(value) <= MAX_KEY_CHARS and value.isprintable():
        return value
    return None


def auth_error(result: Mapping[str, object]) -> Mapping[str, object] | None:
    """A refusal's ``_meta[authorization-error]`` (None in any other result)."""
    err = meta_of(result).get(codes.AUTH_ERROR_META_KEY)
    return err if isinstance(err, Mapping) else None


def outcome(result: Mapping[str, object]) -> str:
    """What the operator log says of a tool result: replayed, a refusal's code, or ok."""
    if meta_of(result).get(codes.REPLAY_META_KEY):
        return "replayed"
    err = auth_error(result)
    return str(err.get("code")) if err is not None else "ok"

