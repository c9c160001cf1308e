"""A notarized tool call as its client holds it, and the one way to rebuild its call record
(pure, no I/O).

The server side hashes ``{spec, server, tool, arguments, result, salt}`` and puts the salt in
the result's ``_meta["com.rightshold/tool-call"]`` block. Everyone who checks the call later, the
SDK's client side, the verifier and the gateway's AER-1 receipts, rebuilds that record from
what was sent (tool, arguments) and received (the result, with its block): :func:`rebuild_record`
is that rebuild, so all three hash exactly the same document.
"""

from __future__ import annotations

from collections.abc import Mapping

from notary.core.errors import NotaryBaseError
from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.records import RecordError, hashed_result, is_final

__all__ = ["RebuildError", "notarization_block", "rebuild_record"]


class RebuildError(NotaryBaseError, ValueError):
    """The result carries no usable notarization: no block, not notarized, or no salt."""


def notarization_block(result: Mapping[str, object]) -> Mapping[str, object] | None:
    """The ``_meta["com.rightshold/tool-call"]`` block of a result (wire JSON), or None."""
    meta = result.get("_meta")
    block = meta.get(TOOL_CALL_META_KEY) if isinstance(meta, Mapping) else None
    return block if isinstance(block, Mapping) else None


def rebuild_record(tool: str, arguments: Mapping[str, object] | None,
                   result: Mapping[str, object], *, server: str | None = None
                   ) -> dict[str, object]:
    """The rs-tool-call/1 record JSON of a notarized call, for ``record_from_json``.

    ``arguments`` are the call's arguments exactly as sent (None: the call had none, ``{}``);
    ``result`` the result exactly as received, as wire JSON with its ``_meta``. The salt comes
    from the result's notarization block; the hashed part of the result is kept (``_meta`` and
    ``resultType`` are not part of the commitment). A result that is malformed or not final is
    kept as received minus ``_meta``, so that checking the record reports what is wrong.
    ``server`` is included only when given: a verifier otherwise takes the receipt's.

    Raises :class:`RebuildError` when the result has no block, its block says it was not
    notarized, or the block has no salt.
    """
    block = notarization_block(result)
    if block is None:
        raise RebuildError(f"the result has no _meta[{TOOL_CALL_META_KEY!r}] block: it was not "
                           "notarized, or its _meta was stripped on the way")
    if block.get("notarized") is False:
        raise RebuildError(f"the server says this result was not notarized: "
                           f"{block.get('reason', 'no reason given')}")
    salt = block.get("salt")
    if not isinstance(salt, str):
        raise RebuildError(f"_meta[{TOOL_CALL_META_KEY!r}].salt is missing: the record cannot "
                           "be rebuilt without it")
    try:
        if not is_final(result):
            raise RecordError("$.result.resultType", "is not final")
        hashed: Mapping[str, object] = hashed_result(result)
    except RecordError:
        hashed = {k: v for k, v in result.items() if k != "_meta"}
    record: dict[str, object] = {
        "tool": tool,
        "arguments": {} if arguments is None else (
            dict(arguments) if isinstance(arguments, Mapping) else arguments),
        "result": dict(hashed),
        "salt": salt,
    }
    if server is not None:
        record["server"] = server
    return record
