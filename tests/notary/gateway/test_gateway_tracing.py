"""One trace from an MCP client's ``traceparent`` through the gateway and a notarized upstream
to the notary's commit, exported by OTLP to a real receiver (docs/tracing.md).

Every process here is a real one (``notary serve``, ``notary gateway --http``, the example
notarized server under it over stdio), each told where to export only by the standard
``OTEL_*`` variables; the receiver decodes what they send with opentelemetry-proto.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from pathlib import Path

from mcp import Client

from notary.core.meta import TOOL_CALL_META_KEY
from notary.gateway import codes
from tests.notary_server import NotaryProcess, free_port
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.waiting import until

REPO = Path(__file__).resolve().parents[3]
SERVER, CLIENT = 2, 3  # OTLP span kinds


def _chain(spans: list[ReceivedSpan], leaf: ReceivedSpan) -> list[ReceivedSpan]:
    """``leaf`` and its ancestors among ``spans``, leaf first."""
    by_id = {s.span_id: s for s in spans}
    chain = [leaf]
    while chain[-1].parent in by_id:
        chain.append(by_id[chain[-1].parent])
    return chain


async def _gateway(tmp: Path, notary: NotaryProcess, key: str, receiver: OtlpReceiver,
                   port: int) -> asyncio.subprocess.Process:
    key_file = tmp / "notary.key"
    key_file.write_text(key)
    otel = receiver.env()
    upstream_env = [f"--upstream-env={k}={v}" for k, v in {
        "NOTARY_URL": notary.url, "NOTARY_API_KEY": key, "PYTHONPATH": str(REPO),
        "OTEL_SERVICE_NAME": "upstream", **otel}.items()]
    with open(tmp / "gateway.err", "wb") as errlog:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "notary.cli.main", "gateway",
            "--upstream", f"{sys.executable} examples/notarized_server.py",
            "--upstream-cwd", str(REPO), *upstream_env,
            "--policy", str(REPO / "examples" / "gateway-policy.toml"),
            "--state", str(tmp / "gateway-state.db"), "--notary", notary.url,
            "--api-key-file", str(key_file), "--http", f"127.0.0.1:{port}",
            "--log-format", "json",
            cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO), **otel,
                                "OTEL_SERVICE_NAME": "gateway"},
            stdin=asyncio.subprocess.DEVNULL, stdout=errlog, stderr=errlog)
    for _ in range(600):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return proc
        except OSError:
            assert proc.returncode is None, (tmp / "gateway.err").read_text()
            await asyncio.sleep(0.05)
    raise AssertionError("the gateway did not listen")


async def test_one_trace_from_the_client_through_gateway_and_upstream_to_the_commit(
        tmp_path: Path) -> None:
    trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
    with otlp_receiver() as receiver:
        notary = NotaryProcess(tmp_path / "notary-data",
                               env={**receiver.env(), "OTEL_SERVICE_NAME": "notary"})
        with notary:
            key = notary.create_api_key()
            port = free_port()
            gateway = await _gateway(tmp_path, notary, key, receiver, port)
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    result = await client.call_tool(
                        "add", {"a": 2, "b": 40},
                        meta={"traceparent": f"00-{trace_id}-{client_span}-01"})
                assert not result.is_error, result
                meta = result.meta or {}
                upstream_receipt = meta[codes.UPSTREAM_TOOL_CALL_META_KEY]["receipt"]["id"]
                gateway_receipt = meta[TOOL_CALL_META_KEY]["id"]

                def commit_of(receipt_id: str) -> ReceivedSpan | None:
                    spans = receiver.received()
                    notarized = [s for s in spans if s.name == "notary.notarize"
                                 and s.attributes.get("notary.receipt.id") == receipt_id]
                    return next((s for s in spans if s.name == "ledger.commit" and notarized
                                 and s.parent == notarized[0].span_id), None)

                await until(lambda: commit_of(upstream_receipt) is not None
                            and commit_of(gateway_receipt) is not None
                            and any(s.name == "tools/call add" and s.service == "gateway"
                                    for s in receiver.received()),
                            "the spans of the call", timeout=30)
            finally:
                gateway.terminate()
                await gateway.wait()
        spans = receiver.received()

    # Everything the call caused is in the client's trace.
    mine = [s for s in spans if s.trace_id == trace_id]
    assert {s.service for s in mine} == {"gateway", "upstream", "notary"}
    commit = commit_of(upstream_receipt)
    assert commit is not None
    chain = _chain(spans, commit)
    assert [(s.service, s.name, s.kind) for s in chain] == [
        ("notary", "ledger.commit", 1),
        ("notary", "notary.notarize", 1),
        ("notary", "POST /v1/tool-calls", SERVER),
        ("upstream", "POST /v1/tool-calls", CLIENT),
        ("upstream", "tools/call add", SERVER),
        ("gateway", "MCP send tools/call add", CLIENT),
        ("gateway", "tools/call add", SERVER),
    ]
    assert chain[-1].parent == client_span  # the client's span is the root's parent
    assert all(s.trace_id == trace_id for s in chain)

    notarize, http_in, http_out = chain[1], chain[2], chain[3]
    assert http_out.attributes["notary.receipt.id"] == upstream_receipt
    assert http_out.attributes["notary.log.index"] == notarize.attributes["notary.log.index"]
    assert notarize.attributes["notary.receipt.id"] == upstream_receipt
    assert notarize.attributes["notary.log.index"] >= 0
    assert notarize.attributes["notary.log.origin"] == commit.attributes["ledger.log.origin"]
    assert notarize.attributes["notary.batch.size"] >= 1
    assert commit.attributes["ledger.commit.entries"] >= 1
    assert commit.attributes["ledger.tree.size"] > notarize.attributes["notary.log.index"]
    assert http_in.attributes["http.response.status_code"] == 201

    gateway_span = chain[-1]
    assert gateway_span.attributes["mcp.method.name"] == "tools/call"
    assert gateway_span.attributes["gen_ai.tool.name"] == "add"
    assert gateway_span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert gateway_span.attributes["notary.policy.decision"] == "allow"
    # The decision's receipt, notarized in the same trace under the gateway's request.
    decision = gateway_span.attributes["notary.policy.receipt_id"]
    decided = [s for s in mine if s.name == "notary.notarize"
               and s.attributes["notary.receipt.id"] == decision]
    assert len(decided) == 1
    assert gateway_span in _chain(spans, decided[0])
    # So is the gateway's notarization of the result it returned.
    returned = commit_of(gateway_receipt)
    assert returned is not None and gateway_span in _chain(spans, returned)
