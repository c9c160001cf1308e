"""Clients against a hostile server on 127.0.0.1: every answer bounded, every failure clean.

A proxy forwards to a real log or notary, except for one path, which it answers with garbage,
a body cut short, an endless body, or JSON nested 30,000 deep (Python's parser raises
RecursionError on that). The monitor, ``notary verify`` and the SDK client must each end with
a clean alarm (exit 1, evidence written), a clean read error (monitor exit 3), a failed
verification level (exit 1) or an input error (exit 2): never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from ledger.process.exitcodes import ExitCode
from notary.core.meta import TOOL_CALL_META_KEY
from notary.sdk.client import NotaryClient, NotaryResponseError, NotaryUnavailableError
from tests.notary_server import LiveNotary, capture_cli
from tests.watched_logs import WatchedLogs, entry, grow, monitor

MODES = ("garbage", "truncated", "huge", "deep")
DEEP = b"[" * 30_000 + b"]" * 30_000  # valid JSON, 60 kB: json.loads raises RecursionError
HUGE = 64 << 20  # bytes the server is willing to stream; every client stops long before


async def hostile_answer(request: web.Request, mode: str) -> web.StreamResponse:
    if mode == "garbage":
        return web.Response(body=b"\x00\xff{\"not\": what you asked for [", status=200,
                            content_type="application/json")
    if mode == "deep":
        return web.Response(body=DEEP, content_type="application/json")
    resp = web.StreamResponse()
    resp.content_type = "application/json"
    if mode == "truncated":
        resp.content_length = 10_000
        await resp.prepare(request)
        await resp.write(b'{"keys": [{"kty": "OKP", ')
        assert request.transport is not None
        request.transport.abort()  # the connection ends 9,975 bytes short
        return resp
    assert mode == "huge"
    await resp.prepare(request)
    chunk = b"[" * 65536
    with contextlib.suppress(ConnectionError, RuntimeError):
        for _ in range(HUGE // len(chunk)):
            if request.transport is None or request.transport.is_closing():
                break  # the client has had enough
            await resp.write(chunk)
    return resp


@dataclass
class Hostile:
    """Forwards every request to ``target`` except the paths in ``rules`` (path → mode)."""

    target: str
    rules: dict[str, str] = field(default_factory=dict)
    hits: dict[str, int] = field(default_factory=dict)
    http: aiohttp.ClientSession | None = None
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path.lstrip("/")
        mode = self.rules.get(path)
        if mode is not None:
            self.hits[path] = self.hits.get(path, 0) + 1
            return await hostile_answer(request, mode)
        assert self.http is not None
        async with self.http.request(request.method, f"{self.target}/{path}",
                                     params=request.query, data=await request.read(),
                                     headers={k: v for k, v in request.headers.items()
                                              if k.lower() in ("authorization", "content-type")}
                                     ) as r:
            body = await r.read()
            return web.Response(status=r.status, body=body,
                                content_type=r.content_type or "application/octet-stream")


@contextlib.asynccontextmanager
async def hostile(target: str, rules: dict[str, str]) -> AsyncIterator[Hostile]:
    proxy = Hostile(target.rstrip("/"), dict(rules))
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", proxy.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    proxy.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    async with aiohttp.ClientSession() as http:
        proxy.http = http
        try:
            yield proxy
        finally:
            await runner.cleanup()


def monitor_args(watched: WatchedLogs, url: str, *extra: str) -> list[str]:
    args = watched.args(*extra)
    args[args.index("--log") + 1] = url
    return args


# ---------------------------------------------------------------------------------------------
# The monitor


@pytest.mark.parametrize("mode", MODES)
async def test_monitor_hostile_checkpoint(watched: WatchedLogs, mode: str) -> None:
    async with hostile(watched.honest_url, {"checkpoint": mode}) as proxy:
        code, _, err = await monitor(*monitor_args(watched, proxy.url))
    assert proxy.hits["checkpoint"] >= 1
    if mode in ("garbage", "deep"):  # an answer, and not a checkpoint: an alarm with evidence
        assert code == ExitCode.CHECK_FAILED and "ALARM bad_checkpoint" in err
        assert [e["kind"] for e in watched.evidence()] == ["bad_checkpoint"]
    else:  # no complete answer within the bound: the log could not be read
        assert code == ExitCode.UNREACHABLE and "cannot read the log" in err
        assert ("larger than" in err) == (mode == "huge")
        assert watched.evidence() == []
    assert "Traceback" not in err


@pytest.mark.parametrize("mode", MODES)
async def test_monitor_hostile_consistency_proof(watched: WatchedLogs, mode: str) -> None:
    """The proof API's answer is useless, so the proof comes from the tiles: still verified."""
    code, _, err = await monitor(*watched.args())
    assert code == ExitCode.OK, err
    await grow(watched.honest, [entry() for _ in range(50)])
    async with hostile(watched.honest_url, {"v1/ledger/proofs/consistency": mode}) as proxy:
        code, out, err = await monitor(*monitor_args(watched, proxy.url))
    assert proxy.hits["v1/ledger/proofs/consistency"] == 1
    assert code == ExitCode.OK, err
    assert "size 350 (consistent with 300)" in out
    assert watched.evidence() == []


@pytest.mark.parametrize("path", ["tile/0/000", "tile/entries/000"])
@pytest.mark.parametrize("mode", MODES)
async def test_monitor_hostile_tiles(watched: WatchedLogs, path: str, mode: str) -> None:
    async with hostile(watched.honest_url, {path: mode}) as proxy:
        code, _, err = await monitor(*monitor_args(watched, proxy.url, "--audit"))
    assert proxy.hits[path] >= 1
    if mode in ("garbage", "deep"):  # served, and not what the signed root commits to
        assert code == ExitCode.CHECK_FAILED, err
        kinds = [e["kind"] for e in watched.evidence()]
        assert kinds in (["tile_mismatch"], ["bad_bundle"])
        assert path in json.dumps(watched.evidence())
    else:
        assert code == ExitCode.UNREACHABLE, err
        assert "cannot read the log" in err
        assert watched.evidence() == []
    assert "Traceback" not in err


# ---------------------------------------------------------------------------------------------
# The verifier (notary verify)


def write_json(path: Path, doc: Any) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("mode", MODES)
async def test_verify_hostile_jwks_url(notary: LiveNotary, tmp_path: Path, mode: str) -> None:
    call = await notary.notarize()
    async with hostile(notary.url, {".well-known/jwks.json": mode}) as proxy:
        code, _, err = await capture_cli(
            "verify", write_json(tmp_path / "call.json", call.saved), "--no-state",
            "--jwks", proxy.url + "/.well-known/jwks.json", "--log-key", notary.vkey)
    assert code == ExitCode.USAGE, err
    assert "cannot fetch the JWKS" in err and "Traceback" not in err
    if mode == "deep":
        assert "nested 30000 deep" in err


@pytest.mark.parametrize("mode", MODES)
async def test_verify_hostile_receipt_url(notary: LiveNotary, tmp_path: Path, mode: str) -> None:
    call = await notary.notarize()
    receipt_id = call.receipt["id"]
    async with hostile(notary.url, {f"v1/tool-calls/{receipt_id}": mode}) as proxy:
        saved = copy.deepcopy(call.saved)
        meta = saved["result"]["_meta"][TOOL_CALL_META_KEY]
        del meta["receipt"]  # not embedded: the verifier fetches it from receipt_url
        meta["receipt_url"] = f"{proxy.url}/v1/tool-calls/{receipt_id}"
        code, _, err = await capture_cli("verify", write_json(tmp_path / "call.json", saved),
                                     "--no-state", *notary.trust_args())
    assert code == ExitCode.USAGE, err
    assert "cannot fetch the receipt" in err and "Traceback" not in err


async def _stored_then_second_call(notary: LiveNotary, tmp_path: Path) -> tuple[str, str]:
    """A state file that remembers the log at size 1, and a call at size 2 to verify."""
    first = await notary.notarize()
    state = str(tmp_path / "state.json")
    code, _, err = await capture_cli("verify", write_json(tmp_path / "first.json", first.saved),
                                 "--state", state, *notary.trust_args())
    assert code == ExitCode.OK, err
    second = await notary.notarize()
    return write_json(tmp_path / "second.json", second.saved), state


@pytest.mark.parametrize("mode", MODES)
async def test_verify_hostile_consistency_proof(notary: LiveNotary, tmp_path: Path,
                                                mode: str) -> None:
    call, state = await _stored_then_second_call(notary, tmp_path)
    async with hostile(notary.url, {"v1/ledger/proofs/consistency": mode}) as proxy:
        code, out, err = await capture_cli("verify", call, "--state", state, "--json",
                                       "--log-url", proxy.url, *notary.trust_args())
    assert proxy.hits["v1/ledger/proofs/consistency"] >= 1
    assert "Traceback" not in err
    consistency = json.loads(out[out.index("{"):])["levels"]["consistency"]
    if mode == "truncated":  # no answer: nothing proven either way
        assert consistency["status"] == "skipped" and code == ExitCode.OK
    else:  # the log answered, and gave no proof for two checkpoints it signed
        assert consistency["status"] == "failed" and code == ExitCode.CHECK_FAILED


@pytest.mark.parametrize("mode", MODES)
async def test_verify_hostile_latest_checkpoint(notary: LiveNotary, tmp_path: Path,
                                                mode: str) -> None:
    call, state = await _stored_then_second_call(notary, tmp_path)
    async with hostile(notary.url, {"checkpoint": mode}) as proxy:
        code, out, err = await capture_cli("verify", call, "--state", state, "--json",
                                       "--log-url", proxy.url, *notary.trust_args())
    assert proxy.hits["checkpoint"] == 1 and "Traceback" not in err
    consistency = json.loads(out[out.index("{"):])["levels"]["consistency"]
    if mode == "truncated":  # the stored and the receipt's checkpoints are still compared
        assert consistency["status"] == "passed" and code == ExitCode.OK
        assert "could not be fetched" in out
    else:
        assert consistency["status"] == "failed" and code == ExitCode.CHECK_FAILED


# ---------------------------------------------------------------------------------------------
# The SDK's notary client


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_client_hostile_answer(notary: LiveNotary, mode: str) -> None:
    call = await notary.notarize()
    receipt_id = call.receipt["id"]
    async with hostile(notary.url, {f"v1/tool-calls/{receipt_id}": mode}) as proxy, \
            NotaryClient(proxy.url, retries=0) as client:
        if mode == "truncated":  # transient by nature: retried, then unavailable
            with pytest.raises(NotaryUnavailableError):
                await client.get_receipt(receipt_id)
        else:
            with pytest.raises(NotaryResponseError):
                await client.get_receipt(receipt_id)


async def test_hostile_server_is_really_hostile() -> None:
    """The attack is real: Python's own parser fails on the deep answer."""
    with pytest.raises(RecursionError):
        json.loads(DEEP)
    await asyncio.sleep(0)
