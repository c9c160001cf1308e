"""Logs for the monitor to watch: an honest log and a fork of it under one key, on loopback.

Logs are :class:`ledger.log.facade.Log` over :class:`MemoryStore` served by the ledger's own
HTTP app; a small proxy in front of them lets a test switch the monitor to the forked history,
replay an old checkpoint, or tamper with one tile or bundle on its way out. The monitor's tests
use them, and the verifier's hostile-answer tests put a hostile proxy in front of the honest one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from aiohttp import web

from ledger.cli.monitor import register, run
from ledger.core.note import Ed25519Signer
from ledger.http.routes import create_ledger_app
from ledger.log.facade import Log
from ledger.storage.memory import MemoryStore
from notary.core.entry import LogEntry
from notary.core.ids import format_issued_at, new_receipt_id
from notary.operator.watch_server import server_filter
from tests.servers import Serve

__all__ = ["ORIGIN", "Proxy", "WatchedLogs", "entry", "grow", "head_note", "monitor",
           "watched_logs"]

ORIGIN = "monitor.test/log"


def entry(server: str = "srv", tool: str = "t") -> bytes:
    return LogEntry(id=new_receipt_id(), server=server, tool=tool, call_sha256=os.urandom(32),
                    issued_at=format_issued_at(datetime.now(UTC))).encode()


async def grow(log: Log, entries: list[bytes]) -> None:
    await asyncio.gather(*(log.append(e) for e in entries))


async def head_note(log: Log) -> bytes:
    head = await log.head(0)
    assert head is not None
    return head.note


@dataclass
class Proxy:
    """Forwards GETs to ``target``; ``override`` replaces whole answers, ``tamper`` edits them."""

    target: str = ""
    override: dict[str, bytes] = field(default_factory=dict)
    tamper: dict[str, Callable[[bytes], bytes]] = field(default_factory=dict)
    http: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path.lstrip("/")
        if path in self.override:
            return web.Response(body=self.override[path])
        assert self.http is not None
        async with self.http.get(f"{self.target}/{path}", params=request.query) as r:
            body = await r.read()
            status = r.status
        if path in self.tamper:
            body = self.tamper[path](body)
        return web.Response(status=status, body=body)


@dataclass
class WatchedLogs:
    signer: Ed25519Signer
    honest: Log
    fork: Log
    honest_url: str
    fork_url: str
    proxy: Proxy
    url: str
    tmp: Path

    def args(self, *extra: str) -> list[str]:
        return ["monitor", "--log", self.url, "--vkey", self.signer.verifier_key_text(),
                "--state", str(self.tmp / "state.json"),
                "--evidence-dir", str(self.tmp / "evidence"), *extra]

    def evidence(self) -> list[dict[str, object]]:
        directory = self.tmp / "evidence"
        if not directory.exists():
            return []
        return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


async def monitor(*argv: str) -> tuple[int, str, str]:
    """``ledger monitor ARGV`` in this loop (with the notary's ``--watch-server``): (exit
    status, standard output, standard error)."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"), watch=server_filter)
    out, err = io.StringIO(), io.StringIO()
    code = await run(parser.parse_args(list(argv)), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@contextlib.asynccontextmanager
async def watched_logs(tmp: Path, serve: Serve) -> AsyncIterator[WatchedLogs]:
    """Two logs of 300 entries under one key, the fork's last 100 its own, each served by
    ``serve``; the proxy in front forwards to the honest one. Evidence and state go to
    ``tmp``."""
    signer = Ed25519Signer.generate(ORIGIN)
    honest = await Log.open(MemoryStore(), signer=signer)
    fork = await Log.open(MemoryStore(), signer=signer)
    shared = [entry() for _ in range(300)]
    await grow(honest, shared)
    await grow(fork, shared[:200])
    await grow(fork, [entry("evil") for _ in range(100)])
    honest_url = (await serve(create_ledger_app(honest))).url
    fork_url = (await serve(create_ledger_app(fork))).url
    proxy = Proxy(target=honest_url)
    app = web.Application()
    app.router.add_get("/{path:.*}", proxy.handle)
    url = (await serve(app)).url
    async with aiohttp.ClientSession() as http:
        proxy.http = http
        yield WatchedLogs(signer, honest, fork, honest_url, fork_url, proxy, url, tmp)


