"""The one record rebuild (``notary.core.toolcall``): what the SDK's client side, the verifier
and the gateway hash when they check a notarized tool call."""

from __future__ import annotations

from typing import Any

import pytest

from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.records import CallRecord, new_salt, record_from_json
from notary.core.toolcall import RebuildError, notarization_block, rebuild_record
from notary.sdk.mcp import record_for
from notary.verifier.inputs import call_from_tool_result

ARGS = {"city": "Oslo", "days": 3}


def notarized(result: dict[str, Any], salt: str) -> tuple[dict[str, Any], CallRecord]:
    """``result`` as a server's SDK sends it, and the record it hashed."""
    record = CallRecord(server="weather", tool="forecast", arguments=ARGS, result=result,
                        salt=salt)
    block = {"spec": "rs-tool-call/1", "id": "tc_AAAAAAAAAAAAAAAAAAAAAA",
             "call_sha256": record.call_sha256(), "salt": salt}
    wire = {**result, "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weather"},
                      TOOL_CALL_META_KEY: block}}
    return wire, record


RESULTS = [
    {"content": [{"type": "text", "text": "rain"}]},
    {"content": [], "structuredContent": {"mm": 7}, "isError": False},
    {"content": [{"type": "text", "text": "boom"}], "isError": True},
]


@pytest.mark.parametrize("result", RESULTS)
def test_every_checker_rebuilds_the_hashed_record(result: dict[str, Any]) -> None:
    wire, record = notarized(result, new_salt())
    rebuilt = rebuild_record("forecast", ARGS, wire, server="weather")
    assert record_from_json(rebuilt).call_sha256() == record.call_sha256()
    assert "_meta" not in rebuilt["result"] and "resultType" not in rebuilt["result"]  # type: ignore[operator]
    # The SDK's client side and the verifier hash exactly that document.
    assert record_for("forecast", ARGS, wire, server="weather") == rebuilt
    assert call_from_tool_result(wire, tool="forecast", arguments=ARGS,
                                 server="weather").record == rebuilt
    # Without a server the record leaves it to the receipt.
    assert "server" not in rebuild_record("forecast", ARGS, wire)
    assert rebuild_record("forecast", None, wire)["arguments"] == {}


def test_what_cannot_be_rebuilt() -> None:
    wire, _ = notarized(RESULTS[0], new_salt())
    with pytest.raises(RebuildError, match="no _meta"):
        rebuild_record("forecast", ARGS, RESULTS[0])
    block = notarization_block(wire)
    assert block is not None and block["salt"]
    unsalted = {**wire, "_meta": {TOOL_CALL_META_KEY: {k: v for k, v in block.items()
                                                       if k != "salt"}}}
    with pytest.raises(RebuildError, match="salt"):
        rebuild_record("forecast", ARGS, unsalted)
    refused = {**wire, "_meta": {TOOL_CALL_META_KEY: {"notarized": False, "reason": "quota"}}}
    with pytest.raises(RebuildError, match="not notarized: quota"):
        rebuild_record("forecast", ARGS, refused)
    assert notarization_block({"content": [], "_meta": "x"}) is None


def test_a_malformed_or_unfinished_result_is_kept_for_the_record_check() -> None:
    """The record level must fail and say why, not the rebuild: keep what was received."""
    salt = new_salt()
    block = {"_meta": {TOOL_CALL_META_KEY: {"salt": salt}}}
    no_content = rebuild_record("t", {}, {"text": "x", **block})
    assert no_content["result"] == {"text": "x"}
    unfinished = rebuild_record("t", {}, {"content": [], "resultType": "input_required",
                                          **block})
    assert unfinished["result"] == {"content": [], "resultType": "input_required"}
    with pytest.raises(ValueError, match="not final"):
        record_from_json({**unfinished, "server": "s"})
