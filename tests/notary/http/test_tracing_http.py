"""The notary continues a caller's W3C ``traceparent`` on ``POST /v1/tool-calls``, on the plain
path and through aiohttp: a server span, the notarization (receipt id, log origin and index,
batch size) and the commit, which is a child of one request of its batch and linked to the
others (docs/tracing.md). Exported by OTLP to a real receiver."""

from __future__ import annotations

import hashlib
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.notary_server import NotaryProcess
from tests.otlp_receiver import otlp_receiver
from tests.waiting import wait_until

REQUESTS = 12


@pytest.mark.parametrize("fast_path", ["on", "off"])
def test_concurrent_requests_each_in_their_trace_down_to_the_commit(tmp_path: Path,
                                                                     fast_path: str) -> None:
    callers = [(secrets.token_hex(16), secrets.token_hex(8)) for _ in range(REQUESTS)]
    with otlp_receiver() as receiver:
        with NotaryProcess(tmp_path / "data", env={
                **receiver.env(), "OTEL_SERVICE_NAME": "notary", "NOTARY_FAST_PATH": fast_path,
        }) as notary:
            key = notary.create_api_key()

            def post(i: int) -> int:
                trace_id, span_id = callers[i]
                digest = hashlib.sha256(f"call {i}".encode()).hexdigest()
                return notary.post("/v1/tool-calls", api_key=key, json_body={
                    "server": "srv", "tool": "t", "call_sha256": digest}, headers={
                    "traceparent": f"00-{trace_id}-{span_id}-01",
                    "tracestate": "vendor=x"}).status

            with ThreadPoolExecutor(REQUESTS) as pool:
                assert list(pool.map(post, range(REQUESTS))) == [201] * REQUESTS
            # A request without a traceparent is traced in a trace of its own.
            assert notary.post("/v1/tool-calls", api_key=key, json_body={
                "server": "srv", "tool": "t", "call_sha256": "ab" * 32}).status == 201
            # Malformed trace context is ignored, never an error.
            assert notary.post("/v1/tool-calls", api_key=key, json_body={
                "server": "srv", "tool": "t", "call_sha256": "cd" * 32},
                headers={"traceparent": "00-zz-nope"}).status == 201

            def notarized() -> int:
                return sum(s.name == "notary.notarize" for s in receiver.received())
            wait_until(lambda: notarized() == REQUESTS + 2, "every notarization's span")
            wait_until(lambda: sum(s.attributes.get("ledger.commit.entries", 0)
                                   for s in receiver.received()
                                   if s.name == "ledger.commit") >= REQUESTS + 2,
                       "every commit's span")
        spans = receiver.received()

    commits = [s for s in spans if s.name == "ledger.commit"]
    for trace_id, caller in callers:
        mine = [s for s in spans if s.trace_id == trace_id]
        (server,) = [s for s in mine if s.name == "POST /v1/tool-calls"]
        assert server.parent == caller and server.kind == 2
        assert server.attributes["http.response.status_code"] == 201
        (notarize,) = [s for s in mine if s.name == "notary.notarize"]
        assert notarize.parent == server.span_id
        assert notarize.attributes["notary.receipt.id"].startswith("tc_")
        assert notarize.attributes["notary.log.index"] >= 0
        assert notarize.attributes["notary.batch.size"] >= 1
        # Its commit: a child of this notarization, or of another one of its batch and
        # linked to this one.
        (commit,) = [c for c in commits if c.parent == notarize.span_id
                     or (trace_id, notarize.span_id) in c.links]
        assert commit.attributes["ledger.commit.entries"] == notarize.attributes[
            "notary.batch.size"]
        assert commit.attributes["ledger.log.origin"] == notarize.attributes["notary.log.origin"]
    untraced = [s for s in spans if s.name == "POST /v1/tool-calls" and s.parent == ""]
    assert len(untraced) == 2  # no traceparent, and a malformed one: new traces
