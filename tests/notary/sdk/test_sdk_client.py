"""NotaryClient: retries (what and how often), typed errors, and the real API round trip.

Retry behaviour is tested against a tiny aiohttp stub on 127.0.0.1 that answers from a
script (503, 503, 201...), so each test knows exactly how many requests must arrive.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from notary.core.receipts import build_receipt
from notary.core.records import CallRecord, new_salt
from notary.core.verification import verify_receipt
from notary.sdk import (
    NotaryClient,
    NotaryHTTPError,
    NotaryResponseError,
    NotaryUnavailableError,
)
from notary.sdk import client as client_module
from tests.notary_server import LiveNotary, closed_url
from tests.servers import Serve

DIGEST = "ab" * 32
BODY = {"server": "srv", "tool": "echo", "call_sha256": DIGEST}


def receipt_for(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A receipt of the right shape for the client's checks (the stub's signature is fake)."""
    receipt = build_receipt(id="tc_AAAAAAAAAAAAAAAAAAAAAA", server=body["server"],
                            tool=body["tool"], call_sha256_hex=body["call_sha256"],
                            issued_at="2026-01-01T00:00:00.000Z", origin="stub.example/log",
                            index=0, entry_url="http://stub.example/v1/ledger/entries/0")
    receipt["signature"] = {"alg": "EdDSA", "kid": "stub", "sig": "AAAA"}
    receipt["proof"] = "c2sp.org/tlog-proof@v1\n"
    receipt.update(changes)
    return receipt


Step = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status(code: int, error: str = "x", headers: dict[str, str] | None = None) -> Step:
    async def answer(request: web.Request) -> web.StreamResponse:
        return web.json_response({"error": {"code": error, "message": f"stub {code}"}},
                                 status=code, headers=headers)
    return answer


async def ok(request: web.Request) -> web.StreamResponse:
    return web.json_response(receipt_for(await request.json()), status=201)


def slow(seconds: float) -> Step:
    async def answer(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        return await ok(request)
    return answer


@dataclass
class Stub:
    """Answers POST /v1/tool-calls with ``script[n]`` for the n-th request (last one repeats)."""

    script: list[Step]
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append({"auth": request.headers.get("Authorization"),
                              "body": await request.read()})
        step = self.script[min(len(self.requests), len(self.script)) - 1]
        return await step(request)


@pytest.fixture
async def stub(serve: Serve) -> Callable[..., Awaitable[Stub]]:
    async def start(*script: Step) -> Stub:
        s = Stub(list(script))
        app = web.Application()
        app.router.add_post("/v1/tool-calls", s.handle)
        app.router.add_get("/plain", _plain)
        app.router.add_get("/list", _list)
        s.url = (await serve(app)).url
        return s

    return start


async def _plain(request: web.Request) -> web.StreamResponse:
    return web.Response(text="not json", content_type="application/json")


async def _list(request: web.Request) -> web.StreamResponse:
    return web.Response(text="[1, 2]", content_type="application/json")


def client(url: str, **kwargs: Any) -> NotaryClient:
    kwargs.setdefault("backoff", 0.001)
    return NotaryClient(url, "nk_secret_key", **kwargs)


# Retries ----------------------------------------------------------------------------------


async def test_5xx_is_retried_until_it_succeeds(stub: Callable[..., Awaitable[Stub]]) -> None:
    s = await stub(status(503, "unavailable"), status(503, "unavailable"), ok)
    async with client(s.url, retries=3) as c:
        receipt = await c.notarize("srv", "echo", DIGEST)
    assert receipt.call_sha256 == DIGEST
    assert len(s.requests) == 3
    # Every attempt is the same request, with the key.
    assert {r["body"] for r in s.requests} == {s.requests[0]["body"]}
    assert json.loads(s.requests[0]["body"]) == BODY
    assert all(r["auth"] == "Bearer nk_secret_key" for r in s.requests)


async def test_4xx_is_never_retried(stub: Callable[..., Awaitable[Stub]]) -> None:
    s = await stub(status(400, "invalid_call_sha256"), ok)
    async with client(s.url, retries=5) as c:
        with pytest.raises(NotaryHTTPError) as info:
            await c.notarize("srv", "echo", DIGEST)
    assert (info.value.status, info.value.code) == (400, "invalid_call_sha256")
    assert info.value.message == "stub 400"
    assert len(s.requests) == 1


async def test_429_is_not_retried_and_reports_retry_after(
        stub: Callable[..., Awaitable[Stub]]) -> None:
    s = await stub(status(429, "quota_exceeded", {"Retry-After": "3600"}), ok)
    async with client(s.url) as c:
        with pytest.raises(NotaryHTTPError) as info:
            await c.notarize("srv", "echo", DIGEST)
    assert info.value.code == "quota_exceeded" and info.value.retry_after == 3600
    assert len(s.requests) == 1


async def test_persistent_5xx_gives_unavailable(stub: Callable[..., Awaitable[Stub]]) -> None:
    s = await stub(status(500, "internal"))
    async with client(s.url, retries=2) as c:
        with pytest.raises(NotaryUnavailableError) as info:
            await c.notarize("srv", "echo", DIGEST)
    assert info.value.attempts == 3 and info.value.status == 500
    assert "500 internal" in str(info.value)
    assert len(s.requests) == 3


async def test_non_json_5xx_is_still_retried(stub: Callable[..., Awaitable[Stub]]) -> None:
    async def proxy_error(request: web.Request) -> web.StreamResponse:
        return web.Response(status=502, text="<html>bad gateway</html>")

    s = await stub(proxy_error, ok)
    async with client(s.url) as c:
        await c.notarize("srv", "echo", DIGEST)
    assert len(s.requests) == 2


async def test_timeouts_are_retried(stub: Callable[..., Awaitable[Stub]]) -> None:
    s = await stub(slow(0.6), ok)
    async with client(s.url, timeout=0.2) as c:
        receipt = await c.notarize("srv", "echo", DIGEST)
    assert receipt.id.startswith("tc_") and len(s.requests) == 2


async def test_connection_refused_gives_unavailable_after_retries() -> None:
    async with client(closed_url(), retries=2) as c:
        with pytest.raises(NotaryUnavailableError) as info:
            await c.notarize("srv", "echo", DIGEST)
    assert info.value.attempts == 3 and info.value.status is None
    assert isinstance(info.value.__cause__, aiohttp.ClientError)


async def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    c = NotaryClient("http://127.0.0.1:9", backoff=0.1)
    for retry in range(4):
        base = 0.1 * 2**retry
        delays = {c._delay(retry, None) for _ in range(50)}
        assert all(base / 2 <= d <= base for d in delays)
        assert len(delays) > 1  # jittered
    assert c._delay(20, None) <= client_module.MAX_BACKOFF
    assert c._delay(0, 1.5) >= 1.5  # Retry-After is honoured...
    assert c._delay(0, 3600) <= client_module.MAX_BACKOFF  # ...up to the cap


# Bad answers ------------------------------------------------------------------------------


async def test_receipt_for_another_call_is_refused(stub: Callable[..., Awaitable[Stub]]) -> None:
    async def other(request: web.Request) -> web.StreamResponse:
        return web.json_response(receipt_for({**BODY, "call_sha256": "cd" * 32}), status=201)

    s = await stub(other)
    async with client(s.url) as c:
        with pytest.raises(NotaryResponseError, match="call_sha256"):
            await c.notarize("srv", "echo", DIGEST)
    assert len(s.requests) == 1


async def test_answers_that_are_not_receipts_are_refused(
        stub: Callable[..., Awaitable[Stub]]) -> None:
    async def unsigned(request: web.Request) -> web.StreamResponse:
        doc = receipt_for(await request.json())
        del doc["signature"]
        return web.json_response(doc, status=201)

    async def malformed(request: web.Request) -> web.StreamResponse:
        return web.json_response(receipt_for(await request.json(), ledger={"index": 0}),
                                 status=201)

    async def extra(request: web.Request) -> web.StreamResponse:
        return web.json_response(receipt_for(await request.json(), account="alice"), status=201)

    for answer, match in ((unsigned, "signature"), (malformed, r"\$\.ledger"),
                          (extra, "unexpected")):
        s = await stub(answer)
        async with client(s.url) as c:
            with pytest.raises(NotaryResponseError, match=match):
                await c.notarize("srv", "echo", DIGEST)
        assert len(s.requests) == 1  # not retried: a notary answering garbage is broken


async def test_non_json_answers_are_refused(stub: Callable[..., Awaitable[Stub]]) -> None:
    s = await stub(ok)
    async with client(s.url) as c:
        with pytest.raises(NotaryResponseError, match="not JSON"):
            await c._request("GET", "/plain")
        with pytest.raises(NotaryResponseError, match="not a JSON object"):
            await c._request("GET", "/list")


async def test_argument_checks_and_no_key_in_repr() -> None:
    c = NotaryClient("http://127.0.0.1:9", "nk_secret_key")
    assert "nk_secret_key" not in repr(c)
    with pytest.raises(ValueError, match="64 lower-case hex"):
        await c.notarize("srv", "echo", DIGEST.upper())
    with pytest.raises(ValueError, match="API key"):
        await NotaryClient("http://127.0.0.1:9").notarize("srv", "echo", DIGEST)
    with pytest.raises(ValueError):
        NotaryClient("127.0.0.1:9")
    await c.close()


async def test_a_callers_session_is_used_and_left_open(
        stub: Callable[..., Awaitable[Stub]]) -> None:
    s = await stub(ok)
    async with aiohttp.ClientSession() as session:
        async with NotaryClient(s.url, "k", session=session) as c:
            await c.notarize("srv", "echo", DIGEST)
        assert not session.closed
    # An owned session is reopened after close, so a client can serve several lifespans.
    c = client(s.url)
    await c.notarize("srv", "echo", DIGEST)
    await c.close()
    await c.notarize("srv", "echo", DIGEST)
    await c.close()
    assert len(s.requests) == 3


# Against the real notary ------------------------------------------------------------------


async def test_every_endpoint_against_the_real_notary(notary: LiveNotary) -> None:
    record = CallRecord(server="srv", tool="echo", arguments={"x": 1},
                        result={"content": [{"type": "text", "text": "1"}]}, salt=new_salt())
    digest = record.call_sha256()
    async with NotaryClient(notary.url, notary.key) as c:
        receipt = await c.notarize("srv", "echo", digest)
        again = await c.notarize("srv", "echo", digest)  # idempotent: what makes retry safe
        assert again.without_proof() == receipt.without_proof()  # the same signed receipt
        fetched = await c.get_receipt(receipt.id)
        found = await c.lookup(digest)
        assert fetched.without_proof() == found.without_proof() == receipt.without_proof()
        online = await c.verify(receipt.id, {k: v for k, v in record.to_json().items()
                                                if k not in ("spec", "server")})
        assert online["valid"] is True
        ledger = await c.ledger()
        assert ledger["size"] == 1 and ledger["vkey"].startswith(ledger["origin"] + "+")
        jwks = await c.jwks()
        assert receipt.signature is not None
        assert receipt.signature.kid in {k["kid"] for k in jwks["keys"]}
        with pytest.raises(NotaryHTTPError) as info:
            await c.lookup("00" * 32)
        assert (info.value.status, info.value.code) == (404, "not_found")
        assert c.receipt_url(receipt.id) == f"{notary.url}/v1/tool-calls/{receipt.id}"
    verdict = verify_receipt(receipt, record=record.to_json(), jwks=notary.jwks,
                             log_verifier=notary.log_key)
    assert verdict.valid, verdict.to_json()
    async with NotaryClient(notary.url, "nk_000000000000_" + "A" * 43) as c:
        with pytest.raises(NotaryHTTPError) as info:
            await c.notarize("srv", "echo", digest)
    assert (info.value.status, info.value.code) == (401, "unauthorized")
