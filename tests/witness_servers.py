"""Witnesses and mirrors on loopback, which a test can stop and start again where they were.

Each binds its port when it is made, so one not started yet refuses connections (it is down)
and no other process can take its port meanwhile; stopped and started again it reopens the same
state, as a restart would. :class:`Hanging` accepts and never answers: the slowest possible
witness or mirror. The notary's and the ledger's witnessing tests run against these.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from ledger.cli.mirror import close_mirror, open_mirror
from ledger.cli.witness import parse_log_spec
from ledger.core.note import Ed25519Verifier
from ledger.mirror.server import Mirror, create_mirror_app
from ledger.witness.server import Witness, WitnessSigner, create_witness_app
from ledger.witness.store import WitnessStore
from tests.servers import bound_socket, start_server

__all__ = ["Hanging", "MirrorProc", "WitnessProc"]


@dataclass
class WitnessProc:
    """A witness app on a fixed loopback port, which can be stopped and started again.

    Its port is bound when it is made, so a witness not started yet refuses connections (it
    is down) and no other process can take its port meanwhile.
    """

    signer: WitnessSigner
    data: Path
    log_vkey: str
    sock: socket.socket | None = field(default_factory=bound_socket)
    runner: web.AppRunner | None = None
    store: WitnessStore | None = None

    def __post_init__(self) -> None:
        assert self.sock is not None
        self.port: int = self.sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spec(self) -> str:
        return f"{self.url}={self.signer.verifier_key_text()}"

    async def start(self) -> None:
        self.store = await WitnessStore.open(self.data, self.signer.verifier_key_text())
        origin, verifier = parse_log_spec(self.log_vkey)  # Ed25519 or ML-DSA-44
        app = create_witness_app(Witness(self.signer, {origin: [verifier]}, self.store))
        sock, self.sock = self.sock, None  # first start: the bound socket; then the port
        self.runner = (await start_server(app, sock=sock, port=self.port)).runner

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        if self.store is not None:
            await self.store.close()
            self.store = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class Hanging:
    """Accepts connections and requests, never answers: the slowest possible witness."""

    def __init__(self) -> None:
        self.sock = bound_socket()
        self.port = self.sock.getsockname()[1]
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                await reader.read(-1)

        self.server = await asyncio.start_server(handle, sock=self.sock)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()


@dataclass
class MirrorProc:
    """A tlog-mirror app on a fixed loopback port over ``data``; stopped and started again
    it reopens the same state (a restart)."""

    signer: WitnessSigner
    data: Path
    origin: str
    log_vkey: str
    sock: socket.socket | None = field(default_factory=bound_socket)
    runner: web.AppRunner | None = None
    mirror: Mirror | None = None

    def __post_init__(self) -> None:
        assert self.sock is not None
        self.port: int = self.sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spec(self) -> str:
        return f"{self.url}={self.signer.verifier_key_text()}"

    async def start(self) -> None:
        self.mirror = await open_mirror([self.signer],
                                        {self.origin: [Ed25519Verifier.from_vkey(self.log_vkey)]},
                                        self.data)
        sock, self.sock = self.sock, None
        self.runner = (await start_server(create_mirror_app(self.mirror), sock=sock,
                                          port=self.port)).runner

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        if self.mirror is not None:
            await close_mirror(self.mirror)
            self.mirror = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
