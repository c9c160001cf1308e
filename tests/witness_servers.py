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

from ledger.cli.cosigner_args import parse_log_spec
from ledger.cli.mirror import close_mirror, open_mirror
from ledger.core.note import Ed25519Verifier
from ledger.cosigner.cosigner import WitnessSigner
from ledger.mirror.server import Mirror, create_mirror_app
from ledger.witness.server import Witness, create_witness_app
from ledger.witness.store import WitnessStore
from tests.servers import bound_socket, start_server

__all__ = ["Hanging", "MirrorProc", "WitnessProc"]


@dataclass
class _Cosigner:
    """A witness or mirror app on a fixed loopback port, which can be stopped and started
    again (``sock`` may be bound anew to ``port`` before a restart)."""

    signer: WitnessSigner
    data: Path
    sock: socket.socket | None = field(default_factory=bound_socket, kw_only=True)
    runner: web.AppRunner | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        assert self.sock is not None
        self.port: int = self.sock.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def spec(self) -> str:
        """``URL=VKEY``, as ``--witness`` and ``--mirror`` take it."""
        return f"{self.url}={self.signer.verifier_key_text()}"

    async def _serve(self, app: web.Application) -> None:
        sock, self.sock = self.sock, None  # first start: the bound socket; then the port
        self.runner = (await start_server(app, sock=sock, port=self.port)).runner

    async def _stop_serving(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None


@dataclass
class WitnessProc(_Cosigner):
    """A witness of the log ``log_vkey`` (Ed25519 or ML-DSA-44), and of the logs of
    ``more_logs`` (as ``notary witness --log`` is given several), with its state in ``data``."""

    log_vkey: str
    store: WitnessStore | None = field(default=None, kw_only=True)
    more_logs: tuple[str, ...] = field(default=(), kw_only=True)

    async def start(self) -> None:
        self.store = await WitnessStore.open(self.data, self.signer.verifier_key_text())
        logs = dict(parse_log_spec(k) for k in (self.log_vkey, *self.more_logs))
        await self._serve(create_witness_app(Witness(
            self.signer, {origin: [verifier] for origin, verifier in logs.items()}, self.store)))

    async def stop(self) -> None:
        await self._stop_serving()
        if self.store is not None:
            await self.store.close()
            self.store = None


@dataclass
class MirrorProc(_Cosigner):
    """A tlog-mirror of the log ``origin`` (key ``log_vkey``) with its copy in ``data``."""

    origin: str
    log_vkey: str
    mirror: Mirror | None = field(default=None, kw_only=True)

    async def start(self) -> None:
        self.mirror = await open_mirror([self.signer],
                                        {self.origin: [Ed25519Verifier.from_vkey(self.log_vkey)]},
                                        self.data)
        await self._serve(create_mirror_app(self.mirror))

    async def stop(self) -> None:
        await self._stop_serving()
        if self.mirror is not None:
            await close_mirror(self.mirror)
            self.mirror = None


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
