"""A server whose notarization cannot work: refused at start-up, or the documented error.

A notarizing server without an API key is a misconfiguration: it is refused when the
``Notarizer`` is built, with a message naming the setting, rather than answering every call
with a bare "Internal server error" and a traceback. Once the tool has run, every failure to
notarize (a key revoked meanwhile, a notary that stopped, even an unexpected error) reaches the
``mcp.Client`` as the JSON-RPC error the SDK documents (INTERNAL_ERROR, ``data`` =
``{spec, notarized: false, reason, tool_executed: true}``), word for word what the JS package
sends, with one log line on the server and no key in it. Against the real notary on loopback,
through the real client in both protocol modes.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from types import ModuleType

import aiohttp
import pytest
from mcp import Client, MCPError
from mcp_types import INTERNAL_ERROR

from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.records import SPEC
from notary.sdk import Notarizer, NotaryClient
from tests.notary_server import AppNotary

REPO = Path(__file__).resolve().parents[3]


def _example_server() -> ModuleType:
    path = REPO / "examples" / "notarized_server.py"
    spec = importlib.util.spec_from_file_location("_example_notarized_server_failures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example_server = _example_server()


def withheld(tool: str, reason: str) -> str:
    """The documented message of a withheld result (the JS package's, character for character)."""
    return (f'tool "{tool}" ran but its result could not be notarized ({reason}); the result is '
            "withheld. Its side effects, if any, have happened: do not blindly retry a "
            "non-idempotent call.")


def documented(reason: str) -> dict[str, object]:
    return {TOOL_CALL_META_KEY: {"spec": SPEC, "notarized": False, "reason": reason,
                                 "tool_executed": True}}


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# At start-up ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, ""])
async def test_a_notarizer_without_an_api_key_is_refused_when_built(
        notary_app: AppNotary, key: str | None) -> None:
    client = NotaryClient(notary_app.url, key)
    assert not client.has_api_key
    with pytest.raises(ValueError, match="no API key") as info:
        Notarizer(client, "example")
    # The message names the setting and where servers usually take it from.
    assert "api_key" in str(info.value) and "NOTARY_API_KEY" in str(info.value)
    assert "notary apikey create" in str(info.value)
    await client.close()


async def test_a_key_that_cannot_be_sent_is_refused_without_showing_it() -> None:
    for bad in ("nk_abc_def\n", " nk_abc_def", "nk_abc\x00def"):
        with pytest.raises(ValueError, match="whitespace or control") as info:
            NotaryClient("http://127.0.0.1:9", bad)
        assert "nk_abc" not in str(info.value)
    assert NotaryClient("http://127.0.0.1:9", "nk_abc_def").has_api_key


# After the tool ran ------------------------------------------------------------------------


def _failure_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_revoked_key_or_a_stopped_notary_gives_the_documented_error(
        notary_app: AppNotary, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    key = await notary_app.new_api_key("failures")
    notarizer = Notarizer(NotaryClient(notary_app.url, key, retries=1, backoff=0.01), "example")
    async with Client(example_server.build_server(notarizer), mode=mode) as client:
        first = await client.call_tool("add", {"a": 1, "b": 2})
        assert not first.is_error and TOOL_CALL_META_KEY in (first.meta or {})

        await notary_app.revoke_api_key(key)
        revoked = "notary answered 401 unauthorized: this API key has been revoked"
        caplog.clear()
        with caplog.at_level(logging.WARNING), pytest.raises(MCPError) as info:
            await client.call_tool("add", {"a": 1, "b": 2})
        assert (info.value.error.code, info.value.error.message, info.value.error.data) == (
            INTERNAL_ERROR, withheld("add", revoked), documented(revoked))
        records = _failure_records(caplog)
        assert [(r.name, r.levelno, r.getMessage()) for r in records] == [
            ("notary.sdk", logging.WARNING,
             f'could not notarize a result of tool "add" ({revoked}); policy "fail"')]
        assert records[0].exc_info is None  # an expected failure: no traceback
        assert key not in caplog.text

        await notary_app.stop()
        stopped = f"notary at {notary_app.url} unavailable after 2 attempt(s): " \
                  "connection failed (ECONNREFUSED)"
        caplog.clear()
        with caplog.at_level(logging.WARNING), pytest.raises(MCPError) as info:
            await client.call_tool("add", {"a": 1, "b": 2})
        assert (info.value.error.code, info.value.error.message, info.value.error.data) == (
            INTERNAL_ERROR, withheld("add", stopped), documented(stopped))
        records = _failure_records(caplog)
        assert [(r.name, r.levelno, r.exc_info) for r in records] == [
            ("notary.sdk", logging.WARNING, None)]
        assert key not in caplog.text


async def test_an_unexpected_failure_after_the_tool_ran_is_still_the_documented_error(
        notary_app: AppNotary, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    # The application shares its own session and closed it too early: a bug on its side, but
    # the tool has run, so the client must still learn that (and not retry blindly).
    session = aiohttp.ClientSession()
    await session.close()
    key = await notary_app.new_api_key("failures")
    notarizer = Notarizer(NotaryClient(notary_app.url, key, session=session), "example")
    async with Client(example_server.build_server(notarizer), mode=mode) as client:
        with caplog.at_level(logging.WARNING), pytest.raises(MCPError) as info:
            await client.call_tool("add", {"a": 1, "b": 2})
    reason = "unexpected RuntimeError in the notarizer (see the server log)"
    assert (info.value.error.code, info.value.error.message, info.value.error.data) == (
        INTERNAL_ERROR, withheld("add", reason), documented(reason))
    # The log, not the client, gets the details: one line, with the traceback of the bug.
    records = _failure_records(caplog)
    assert [(r.name, r.levelno) for r in records] == [("notary.sdk", logging.ERROR)]
    assert records[0].exc_info is not None and "Session is closed" in caplog.text
    assert key not in caplog.text
