"""One trace from an MCP client's ``traceparent`` through the TypeScript notarized server
(js/test/fixtures/server.ts) to the notary's commit, exported by OTLP to a real receiver
(docs/tracing.md, the TypeScript SDK).

The TypeScript server runs as an application that traces would: its own OpenTelemetry set-up
(js/test/fixtures/instrumentation.ts, a tracer provider with the standard OTLP/HTTP exporter)
loaded by ``node --import``, told where to export only by the standard ``OTEL_*`` variables; so
is ``notary serve``. Needs ``node`` and js/node_modules, as tests/js/test_js_server.py.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from notary.core.meta import TOOL_CALL_META_KEY
from tests.notary_server import NotaryProcess
from tests.otlp_receiver import ReceivedSpan, otlp_receiver
from tests.waiting import until

REPO = Path(__file__).resolve().parents[2]
JS = REPO / "js"
SERVER, CLIENT = 2, 3  # OTLP span kinds


@pytest.fixture(scope="module")
def server_script() -> Path:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed: the JavaScript package needs Node 20+")
    out = subprocess.run([node, "test/support/build-fixture.mjs"], cwd=JS, capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip())


def _chain(spans: list[ReceivedSpan], leaf: ReceivedSpan) -> list[ReceivedSpan]:
    """``leaf`` and its ancestors among ``spans``, leaf first."""
    by_id = {s.span_id: s for s in spans}
    chain = [leaf]
    while chain[-1].parent in by_id:
        chain.append(by_id[chain[-1].parent])
    return chain


@pytest.mark.parametrize(("sdk", "mode"), [("v1", "legacy"), ("v2", "auto")])
async def test_one_trace_from_the_client_through_the_typescript_server_to_the_commit(
        tmp_path: Path, server_script: Path, sdk: str, mode: str) -> None:
    node = shutil.which("node")
    assert node is not None
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    with otlp_receiver() as receiver:
        with NotaryProcess(tmp_path / "notary-data",
                           env={**receiver.env(), "OTEL_SERVICE_NAME": "notary"}) as notary:
            server = StdioServerParameters(
                command=node, cwd=str(JS),
                args=["--import", str(server_script.parent / "instrumentation.mjs"),
                      str(server_script)],
                env={"NOTARY_URL": notary.url, "NOTARY_API_KEY": notary.create_api_key(),
                     "FIXTURE_SDK": sdk, **receiver.env(), "OTEL_SERVICE_NAME": "ts-server"})
            async with Client(server, mode=mode) as client:
                result = await client.call_tool(
                    "add", {"a": 2, "b": 40},
                    meta={"traceparent": f"00-{trace_id}-{client_span}-01"})
                assert not result.is_error, result
                receipt = (result.meta or {})[TOOL_CALL_META_KEY]["receipt"]

                def commit() -> ReceivedSpan | None:
                    spans = receiver.received()
                    notarized = [s for s in spans if s.name == "notary.notarize"
                                 and s.attributes.get("notary.receipt.id") == receipt["id"]]
                    return next((s for s in spans if s.name == "ledger.commit" and notarized
                                 and s.parent == notarized[0].span_id), None)

                # The server's spans leave in a batch (OTEL_BSP_SCHEDULE_DELAY): wait for them
                # while it still runs.
                await until(lambda: commit() is not None
                            and any(s.service == "ts-server" for s in receiver.received()),
                            "the spans of the call", timeout=30)
        spans = receiver.received()

    leaf = commit()
    assert leaf is not None
    chain = _chain(spans, leaf)
    assert [(s.service, s.name, s.kind) for s in chain] == [
        ("notary", "ledger.commit", 1),
        ("notary", "notary.notarize", 1),
        ("notary", "POST /v1/tool-calls", SERVER),
        ("ts-server", "POST /v1/tool-calls", CLIENT),
    ]
    assert chain[-1].parent == client_span  # the MCP client's span is the root's parent
    assert all(s.trace_id == trace_id for s in chain)
    ours, notarize = chain[3], chain[1]
    assert ours.attributes == {
        "http.request.method": "POST", "url.full": f"{notary.url}/v1/tool-calls",
        "gen_ai.tool.name": "add", "notary.receipt.id": receipt["id"],
        "notary.log.origin": receipt["ledger"]["origin"],
        "notary.log.index": receipt["ledger"]["index"]}
    assert notarize.attributes["notary.receipt.id"] == receipt["id"]
    assert notarize.attributes["notary.log.index"] == receipt["ledger"]["index"]
