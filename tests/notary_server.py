"""Run the real notary in tests, every way a test needs one; all traffic to 127.0.0.1 only.

- :class:`NotaryProcess`: the daemon exactly as an operator starts it
  (``python -m notary.cli.main serve --data DIR --listen 127.0.0.1:PORT``) on a free loopback
  port; it waits until ``/healthz`` answers, creates API keys with ``notary apikey create`` and
  stops the process gracefully (SIGTERM, then SIGKILL after a timeout) or brutally
  (:meth:`NotaryProcess.kill9`).
- :func:`app_notary`: the same application in the test's own event loop, for tests that need
  its internals or many quick starts; :func:`live_notary` adds what a client holds (an API
  key, the receipt keys, the log key) and notarizes calls as a notarized server would.
  :func:`start_notary` serves one from settings on a data directory that exists, and again on
  its port after a stop (:class:`ServedNotary`).
- :class:`ThreadedNotary`: that application in a thread of its own, driven like a process.
- :func:`headless_notary`: the service over its store without HTTP, on any store backend.

And the ways tests talk to one: the ``notary`` command in process (:func:`run_cli`,
:func:`capture_cli`), blocking HTTP (:class:`LoopbackHttp`), and load
(:func:`notarize_under_load`).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import io
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
from aiohttp import web

from ledger.core.note import Ed25519Signer, Ed25519Verifier, parse_note
from notary.cli.main import main as notary_cli
from notary.core.jwks import Jwks
from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.receipts import Receipt
from notary.core.records import CallRecord, new_salt
from notary.http.app import create_app
from notary.http.appkeys import NOTARY, STORE
from notary.operator import admin
from notary.sdk import Notarizer, NotaryClient
from notary.serving.config import Settings
from notary.serving.keys import Paths, load_log_key
from notary.serving.service import Account, Notary
from notary.serving.startup import init_data_dir, open_notary
from notary.store import MEMORY
from notary.store.base import NotaryStore
from notary.verifier.trust import Trust, parse_log_keys
from tests.servers import Served, bound_socket, start_server

__all__ = ["ALICE_KEY", "CALL_RECORDS", "NOTARY_BACKENDS", "SHARED_BACKENDS", "UNLIMITED",
           "AppNotary", "Call", "HttpResponse", "LiveNotary", "LoopbackHttp", "NotaryFactory",
           "NotaryProcess", "NotaryStartError", "ServedNotary", "ThreadedNotary", "app_notary",
           "capture_cli", "capture_cli_sync", "checkpoint_size", "closed_url", "create_api_key",
           "digest", "free_port", "headless_notary", "headless_settings", "issue",
           "jwks_listing", "live_notary", "notarize_under_load", "run_cli", "start_app",
           "start_notary"]

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parent.parent


class NotaryStartError(RuntimeError):
    """The daemon exited or did not answer /healthz in time; the message has its log's tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it).

    Only for a server in a child process that must be told its port (its URL goes into
    receipts, or it keeps the port across restarts); in-process servers bind port 0 and keep
    the socket (tests/servers.py), which no other process can take meanwhile.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def closed_url() -> str:
    """A loopback URL nobody listens on (connection refused at once)."""
    return f"http://{HOST}:{free_port()}"


def run_cli(*argv: str) -> tuple[int, str]:
    """``notary ARGV`` in this process: (exit status, standard output).

    In a thread of its own, so that it may be called from a test's running event loop (the
    command runs its own ``asyncio.run``); the caller waits for it.
    """
    def run() -> tuple[int, str]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = notary_cli(list(argv))
        return code, out.getvalue()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def capture_cli_sync(*argv: str) -> tuple[int, str, str]:
    """``notary ARGV`` in the calling thread: (exit status, standard output, standard error);
    an argparse exit is a status like any other."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = notary_cli(list(argv))
        except SystemExit as e:  # argparse
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


async def capture_cli(*argv: str) -> tuple[int, str, str]:
    """:func:`capture_cli_sync` in a worker thread, since the command runs its own event
    loop."""
    return await asyncio.to_thread(capture_cli_sync, *argv)


def create_api_key(data: Path, account: str, allowance: int | None = None) -> str:
    """A new API key (the last line ``notary apikey create`` prints)."""
    extra = [] if allowance is None else ["--monthly-allowance", str(allowance)]
    code, out = run_cli("apikey", "create", "--data", str(data), "--account", account, *extra)
    assert code == 0, out
    return out.strip().splitlines()[-1]


@dataclass
class AppNotary:
    """A notary application serving on a loopback port inside the test's event loop."""

    url: str
    data: Path
    vkey: str
    runner: web.AppRunner

    @property
    def app(self) -> web.Application:
        return self.runner.app

    @property
    def store(self) -> NotaryStore:
        return self.runner.app[STORE]

    @property
    def notary(self) -> Notary:
        return self.runner.app[NOTARY]

    async def new_api_key(self, account: str = "test", allowance: int | None = None) -> str:
        """A new key through the running app's store (any backend)."""
        return (await admin.create_api_key(self.store, account, allowance)).token

    async def cli_api_key(self, account: str = "test", allowance: int | None = None) -> str:
        """A new key through ``notary apikey create``, another writer of the database (the
        SQLite store only). In a worker thread: run inline it would block this event loop,
        and with it a background job of this notary holding SQLite's write lock that the
        command then waits for until it times out."""
        return await asyncio.to_thread(create_api_key, self.data, account, allowance)

    async def revoke_api_key(self, key: str) -> None:
        await admin.revoke_api_key(self.store, key)

    async def rotate_receipt_key(self) -> str:
        """A new receipt key, picked up by the running notary at once; its kid."""
        key = await admin.rotate_receipt_key(Paths(self.data), self.store)
        await self.notary.refresh_keys(force=True)
        return key.kid

    async def stop(self) -> None:
        await self.runner.cleanup()  # idempotent: the context manager calls it again


async def start_app(settings: Settings, sock: socket.socket | None = None) -> Served:
    """Serve the notary application of ``settings`` in this event loop until ``stop()``.

    On ``sock`` when given: bound to the port ``settings.listen`` names before the settings
    were made, since the notary's URL (in every receipt) must be known before its app exists.
    Without it, on that port again: a restart where the notary was.
    """
    _, port = settings.host_port
    return await start_server(create_app(settings), sock=sock, port=port)


@contextlib.asynccontextmanager
async def app_notary(data: Path, **settings: Any) -> AsyncIterator[AppNotary]:
    """A fresh data directory (keys created as on first run) served on 127.0.0.1."""
    sock = bound_socket()
    config = Settings(data=data, listen=f"{HOST}:{sock.getsockname()[1]}", **settings)
    first = init_data_dir(config)
    assert first is not None, f"{data} already holds a notary (with a receipt key)"
    served = await start_app(config, sock)
    try:
        yield AppNotary(served.url, config.data, first.vkey, served.runner)
    finally:
        await served.stop()


CALL_RECORDS: dict[str, dict[str, Any]] = {}
"""The call record of every receipt a :class:`ServedNotary` issued, by receipt id (a test's
notary may have been restarted, or be another process of one log, since it issued)."""


@dataclass
class ServedNotary:
    """A notary application served from its settings (:func:`start_notary`), with an HTTP
    session: for the tests that stop it and start it again on its port and data directory,
    or run two on one data directory, as ``--workers`` does."""

    url: str
    settings: Settings
    runner: web.AppRunner
    http: aiohttp.ClientSession
    vkey: str

    async def get(self, path: str) -> tuple[int, Any, Any]:
        """(status, body, headers) of ``GET path``."""
        async with self.http.get(self.url + path) as r:
            body = await r.read()
            return r.status, body, r.headers

    async def issue(self, key: str, n: int) -> dict[str, Any]:
        """A new receipt; its call record is kept in :data:`CALL_RECORDS`."""
        rec = CallRecord(server="srv", tool="echo", arguments={"n": n},
                         result={"content": [{"type": "text", "text": str(n)}]}, salt=new_salt())
        body = {"server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()}
        async with self.http.post(self.url + "/v1/tool-calls", json=body,
                                  headers={"Authorization": f"Bearer {key}"}) as r:
            assert r.status == 201, await r.text()
            receipt: dict[str, Any] = await r.json()
        CALL_RECORDS[receipt["id"]] = rec.to_json()
        return receipt

    async def new_api_key(self, account: str = "test", allowance: int | None = None) -> str:
        """A new key through this notary's store (not ``notary apikey create`` waited for on
        this loop: see :meth:`AppNotary.cli_api_key`)."""
        return (await admin.create_api_key(self.runner.app[STORE], account, allowance)).token


async def start_notary(settings: Settings, http: aiohttp.ClientSession, vkey: str,
                       sock: socket.socket | None = None) -> ServedNotary:
    """Serve on ``sock`` (first start), else where ``settings`` say (a restart)."""
    served = await start_app(settings, sock)
    return ServedNotary(settings.base_url, settings, served.runner, http, vkey)


async def notarize_under_load(url: str, key: str, received: list[dict[str, Any]],
                              stop: asyncio.Event, clients: int = 32) -> int:
    """Issue receipts from ``clients`` concurrent clients until ``stop``; keep every complete
    201 answer in ``received``. Returns the failures seen (a server killed mid-request)."""
    failures = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        async def client() -> None:
            nonlocal failures
            while not stop.is_set():
                body = {"server": "crash", "tool": "t", "call_sha256": os.urandom(32).hex()}
                try:
                    async with http.post(url + "/v1/tool-calls", json=body,
                                         headers={"Authorization": f"Bearer {key}"}) as r:
                        data = await r.json()
                        if r.status == 201:
                            received.append(data)
                except (TimeoutError, aiohttp.ClientError, ValueError):
                    failures += 1  # the server died mid-request: nothing was promised
                    await asyncio.sleep(0.01)

        await asyncio.gather(*(client() for _ in range(clients)))
    return failures


async def jwks_listing(http: aiohttp.ClientSession, url: str, kids: set[str]) -> Jwks:
    """The JWKS of the notary at ``url``, which must list every key of ``kids`` at once: a
    frontend reads the keys on each JWKS request, so it lists a key another frontend made as
    soon as that key signed anything."""
    async with http.get(f"{url}/.well-known/jwks.json") as r:
        doc = await r.json()
    missing = kids - {key["kid"] for key in doc["keys"]}
    assert not missing, f"{url} does not list the receipt keys {sorted(missing)}"
    return Jwks(doc)


def checkpoint_size(note: bytes) -> int:
    """The tree size a checkpoint note carries (its second line)."""
    return int(parse_note(note).text.split("\n")[1])


@dataclass
class Call:
    """One notarized call as a client holds it: the call, its record and receipt, and the
    tool result carrying them (CallToolResult wire JSON with the notarization ``_meta``)."""

    tool: str
    arguments: dict[str, Any]
    record: CallRecord
    receipt: dict[str, Any]
    result: dict[str, Any]

    @property
    def saved(self) -> dict[str, Any]:
        """The call as ``notary verify`` reads it from a file."""
        return {"tool": self.tool, "arguments": self.arguments, "result": self.result}

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.result["_meta"][TOOL_CALL_META_KEY]
        return meta


@dataclass
class LiveNotary:
    """A notary served in this loop (:func:`app_notary`) with what its clients hold: an API
    key (``key``), the receipt keys (``jwks``, and the document ``jwks_json``) and the log key
    (``log_key``, ``vkey``). :meth:`notarize` logs a call over HTTP as a notarized server
    would and keeps it in ``calls``; :meth:`client` makes SDK clients closed at teardown."""

    app: AppNotary
    key: str
    jwks_json: dict[str, Any]
    http: aiohttp.ClientSession
    tmp: Path
    calls: list[Call] = field(default_factory=list)
    clients: list[NotaryClient] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.app.url

    @property
    def data(self) -> Path:
        return self.app.data

    @property
    def vkey(self) -> str:
        return self.app.vkey

    @property
    def jwks(self) -> Jwks:
        return Jwks(self.jwks_json)

    @property
    def log_key(self) -> Ed25519Verifier:
        return Ed25519Verifier.from_vkey(self.vkey)

    @property
    def signer(self) -> Ed25519Signer:
        """The log's own signing key, to forge a history under it."""
        return load_log_key(Paths(self.data))

    @property
    def jwks_file(self) -> Path:
        path = self.tmp / "jwks.json"
        if not path.exists():
            path.write_text(json.dumps(self.jwks_json))
        return path

    def trust(self, **kw: Any) -> Trust:
        return Trust(self.jwks, parse_log_keys([self.vkey]), **kw)

    def trust_args(self) -> list[str]:
        """The same trust as ``notary verify`` flags."""
        return ["--jwks", str(self.jwks_file), "--log-key", self.vkey]

    async def new_key(self, account: str, allowance: int | None = None) -> str:
        return await self.app.new_api_key(account, allowance)

    def client(self, **kwargs: Any) -> NotaryClient:
        """A client for this notary, closed at teardown (servers without a lifespan that
        closes it would otherwise leak its session)."""
        client = NotaryClient(self.url, kwargs.pop("api_key", self.key), **kwargs)
        self.clients.append(client)
        return client

    def notarizer(self, server_name: str = "example", **kwargs: Any) -> Notarizer:
        return Notarizer(self.client(), server_name, **kwargs)

    async def notarize(self, tool: str = "echo", **arguments: Any) -> Call:
        wire = {"content": [{"type": "text", "text": json.dumps(arguments)}],
                "structuredContent": {"echo": arguments}, "isError": False,
                "resultType": "complete"}
        rec = CallRecord(server="srv", tool=tool, arguments=arguments, result=wire,
                         salt=new_salt())
        async with self.http.post(
                self.url + "/v1/tool-calls", headers={"Authorization": f"Bearer {self.key}"},
                json={"server": "srv", "tool": tool, "call_sha256": rec.call_sha256()}) as r:
            assert r.status == 201, await r.text()
            receipt = await r.json()
        meta = {"spec": "rs-tool-call/1", "id": receipt["id"],
                "call_sha256": receipt["call_sha256"], "salt": rec.salt,
                "receipt_url": f"{self.url}/v1/tool-calls/{receipt['id']}",
                "verify_url": f"{self.url}/v1/tool-calls/verify", "receipt": receipt}
        result = {**wire, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "srv"},
                                    TOOL_CALL_META_KEY: meta}}
        call = Call(tool, arguments, rec, receipt, result)
        self.calls.append(call)
        return call

    async def fetch_receipt(self, receipt_id: str) -> dict[str, Any]:
        async with self.http.get(f"{self.url}/v1/tool-calls/{receipt_id}") as r:
            assert r.status == 200
            out: dict[str, Any] = await r.json()
            return out

    async def size(self) -> int:
        """The size of the log, as ``GET /v1/ledger`` reports it."""
        async with NotaryClient(self.url) as c:
            size = (await c.ledger())["size"]
        assert isinstance(size, int)
        return size

    async def published_size(self, size: int) -> None:
        """Wait until ``/checkpoint`` serves a tree of ``size`` (the log dual-signs what it
        serves at most once a second, so it may lag the newest receipt that long)."""
        for _ in range(100):
            async with self.http.get(self.url + "/checkpoint") as r:
                if f"\n{size}\n" in (await r.text())[:200]:
                    return
            await asyncio.sleep(0.05)
        raise AssertionError(f"/checkpoint never reached size {size}")

    async def stop(self) -> None:
        await self.app.stop()


@contextlib.asynccontextmanager
async def live_notary(tmp: Path, **settings: Any) -> AsyncIterator[LiveNotary]:
    """:func:`app_notary` on ``tmp/data`` with an API key of account ``t``; the SDK clients it
    made are closed on the way out."""
    async with app_notary(tmp / "data", **settings) as app, aiohttp.ClientSession() as http:
        async with http.get(app.url + "/.well-known/jwks.json") as r:
            jwks = await r.json()
        notary = LiveNotary(app, await app.new_api_key("t"), jwks, http, tmp)
        try:
            yield notary
        finally:
            for client in notary.clients:
                await client.close()


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    reason: str = ""

    @property
    def content_type(self) -> str:
        """The media type without parameters, lower case (``application/json``)."""
        return self.header("Content-Type").split(";", 1)[0].strip().lower()

    def header(self, name: str, default: str = "") -> str:
        lname = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lname:
                return value
        return default

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.body)


def _child_env(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The parent's environment minus NOTARY_* settings (they would override our flags'
    defaults), with the repository importable even without an installed package."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTARY_")}
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + path if path else "")
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


class LoopbackHttp:
    """Plain blocking HTTP to a server on 127.0.0.1:``port`` (for synchronous tests)."""

    port: int

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        body: bytes | str | None = None,
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
    ) -> HttpResponse:
        """One HTTP request to this notary; never raises for a 4xx or 5xx status."""
        hdrs = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body)
            hdrs.setdefault("Content-Type", "application/json")
        if api_key is not None:
            hdrs["Authorization"] = f"Bearer {api_key}"
        data = body.encode() if isinstance(body, str) else body
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            payload = resp.read()
            return HttpResponse(resp.status, dict(resp.getheaders()), payload, resp.reason)
        finally:
            conn.close()

    def get(self, path: str, **kwargs: Any) -> HttpResponse:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> HttpResponse:
        return self.request("POST", path, **kwargs)


@dataclass
class NotaryProcess(LoopbackHttp):
    """One ``notary serve`` subprocess with its own data directory.

    ``args`` are extra flags for ``serve`` (``--max-body``, ``--origin``...). The port is
    chosen once and kept across :meth:`restart`, so URLs in issued receipts stay valid.
    ``split_stderr`` keeps stderr (the structured log) apart from stdout, in
    :attr:`stderr_path`; ``nofile`` sets the daemon's ``RLIMIT_NOFILE`` (soft and hard).
    """

    data_dir: Path
    port: int = 0
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    split_stderr: bool = False
    nofile: int | None = None
    log_dir: Path | None = None  # where the daemon's output goes (default: beside data_dir)
    startup_timeout: float = 30.0
    stop_timeout: float = 15.0
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _auto_port: bool = field(default=False, init=False, repr=False)
    _starts: int = field(default=0, init=False, repr=False)
    _log_start: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if not self.port:
            self._auto_port = True
            self.port = free_port()

    # Addresses -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        """stdout and stderr of the daemon (kept outside the data directory)."""
        return (self.log_dir or self.data_dir.parent) / f"{self.data_dir.name}.serve.log"

    @property
    def stderr_path(self) -> Path:
        """stderr of the daemon when ``split_stderr`` is set (else it is in :attr:`log_path`)."""
        return (self.log_dir or self.data_dir.parent) / f"{self.data_dir.name}.stderr.log"

    def log_text(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def stderr_bytes(self) -> bytes:
        try:
            return self.stderr_path.read_bytes()
        except OSError:
            return b""

    # Lifetime ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> NotaryProcess:
        """Start the daemon and return once /healthz answers 200 (bounded wait)."""
        if self.running:
            raise RuntimeError("the notary is already running")
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            self._spawn()
            try:
                self.wait_ready()
                return self
            except NotaryStartError:
                in_use = "address already in use" in (
                    self.log_text() + self.stderr_bytes()[-4000:].decode(errors="replace")).lower()
                self._reap()
                # Another process took the port between free_port() and bind: pick another
                # one, unless receipts may already carry this port in their URLs.
                if in_use and self._auto_port and self._starts == 1 and attempt < 2:
                    self._starts = 0
                    self.port = free_port()
                    continue
                raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        cmd = [sys.executable, "-m", "notary.cli.main", "serve", "--data", str(self.data_dir),
               "--listen", f"{HOST}:{self.port}", "--log-format", "json", *self.args]
        self._starts += 1
        nofile = self.nofile

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with self.log_path.open("ab") as log, self.stderr_path.open("ab") as err:
            self._log_start = log.tell()
            log.write(f"--- start {self._starts}: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log,
                stderr=err if self.split_stderr else subprocess.STDOUT,
                cwd=self.data_dir.parent, env=_child_env(self.env), start_new_session=True,
                preexec_fn=limit if nofile is not None else None,
            )

    def wait_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise NotaryStartError(
                    f"notary serve exited with {code} before it was ready; log:\n"
                    f"{self.log_text()}{self.stderr_bytes()[-4000:].decode(errors='replace')}"
                )
            try:
                resp = self.request("GET", "/healthz", timeout=2.0)
                # Another test's notary may hold this port (free_port() is a moment old);
                # the answer counts once this process has said it listens.
                if resp.status == 200 and self._announced():
                    return
                last = f"/healthz answered {resp.status}, before this process said it listens"
            except OSError as e:
                last = repr(e)
            time.sleep(0.05)
        raise NotaryStartError(
            f"notary serve did not answer /healthz within the timeout ({last}); "
            f"log:\n{self.log_text()}"
        )

    def _announced(self) -> bool:
        """Whether this start's output says it is serving (printed once its socket is bound)."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._log_start)
                return b"Serving on " in log.read()
        except OSError:
            return False

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout``; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self._reap()

    def kill9(self) -> int | None:
        """SIGKILL at once, as a crash would (no draining, no cleanup): its whole process
        group, so ``--workers`` children die with their parent, as on a lost machine."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        return self._reap()

    def restart(self, *, crash: bool = False) -> NotaryProcess:
        """Stop (gracefully, or with SIGKILL when ``crash``) and start again on the same port."""
        if crash:
            self.kill9()
        else:
            self.stop()
        return self.start()

    def _reap(self) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        return proc.returncode

    def __enter__(self) -> NotaryProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # Administration ------------------------------------------------------------------------

    def cli(self, *argv: str, check: bool = True, timeout: float = 60.0
            ) -> subprocess.CompletedProcess[str]:
        """Run ``python -m notary.cli.main ARGV...`` beside the daemon (same environment)."""
        result = subprocess.run(
            [sys.executable, "-m", "notary.cli.main", *argv], capture_output=True, text=True,
            cwd=self.data_dir.parent, env=_child_env(self.env), timeout=timeout,
            stdin=subprocess.DEVNULL, check=False,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"notary {' '.join(argv)} exited with {result.returncode}:\n"
                               f"{result.stdout}\n{result.stderr}")
        return result

    def create_api_key(self, account: str = "test", monthly_allowance: int | None = None) -> str:
        """A new API key for ``account`` (the last stdout line of ``notary apikey create``)."""
        argv = ["apikey", "create", "--data", str(self.data_dir), "--account", account]
        if monthly_allowance is not None:
            argv += ["--monthly-allowance", str(monthly_allowance)]
        lines = self.cli(*argv).stdout.strip().splitlines()
        if not lines:
            raise RuntimeError("notary apikey create printed no key")
        return lines[-1].strip()

    def revoke_api_key(self, key: str) -> None:
        self.cli("apikey", "revoke", "--data", str(self.data_dir), key)


class ThreadedNotary(LoopbackHttp):
    """The notary app served from an event loop in a thread of its own, driven like a
    :class:`NotaryProcess` (blocking HTTP, key administration) but reaching its store in
    process: the way to test stores no other process can open (``database="memory:"``)."""

    def __init__(self, data_dir: Path, **settings: Any) -> None:
        self.data_dir = Path(data_dir)
        self.settings = settings
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="notary", daemon=True)
        self._stack = contextlib.AsyncExitStack()
        self._app: AppNotary | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)

    def start(self) -> ThreadedNotary:
        self._thread.start()
        self._app = self._call(self._stack.enter_async_context(
            app_notary(self.data_dir, **self.settings)))
        assert self._app is not None
        self.port = int(self._app.url.rsplit(":", 1)[1])
        return self

    def stop(self) -> None:
        if self._app is not None:
            self._call(self._stack.aclose())
            self._app = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._loop.close()

    def __enter__(self) -> ThreadedNotary:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def create_api_key(self, account: str = "test", monthly_allowance: int | None = None) -> str:
        assert self._app is not None
        return str(self._call(self._app.new_api_key(account, monthly_allowance)))

    def revoke_api_key(self, key: str) -> None:
        assert self._app is not None
        self._call(self._app.revoke_api_key(key))


NotaryFactory = Callable[..., NotaryProcess]
"""The ``notary_factory`` fixture: ``notary_factory(args=(...), name="small")``."""


# Without HTTP ------------------------------------------------------------------------------
# The service over its store, as ``notary serve`` opens it, for the store contract and the
# write path's rules on every backend. Two opened on one SQLite file or one PostgreSQL
# database are two processes, as far as the store can tell.

NOTARY_BACKENDS = ("sqlite", "memory", "postgres")
SHARED_BACKENDS = ("sqlite", "postgres")  # backends two processes can share
BASE_URL = "http://notary.test:8080"
ALICE_KEY = "a11ce0000000"
UNLIMITED = Account("alice", None)


def headless_settings(data: Path, backend: str, base_url: str = BASE_URL) -> Settings:
    """``backend``: "sqlite", "memory", or the URL of a PostgreSQL database."""
    database = MEMORY if backend == "memory" else "" if backend == "sqlite" else backend
    return Settings(data=data, database=database, public_url=base_url)


@contextlib.asynccontextmanager
async def headless_notary(data: Path, backend: str, base_url: str = BASE_URL
                          ) -> AsyncIterator[Notary]:
    """A notary without HTTP on a data directory (initialised on first use), with the API key
    ``ALICE_KEY`` of the unlimited account ``alice``."""
    config = headless_settings(data, backend, base_url)
    init_data_dir(config)
    notary = await open_notary(config)
    if await notary.store.api_key(ALICE_KEY) is None:
        await notary.store.create_api_key("alice", None, ALICE_KEY, b"\0" * 32)
    try:
        yield notary
    finally:
        assert notary.log is not None
        await notary.log.close()


def digest(n: int) -> str:
    """The ``n``th call digest: distinct per ``n``, the same in every test."""
    return n.to_bytes(32, "big").hex()


async def issue(notary: Notary, n: int, account: Account = UNLIMITED, *, server: str = "srv",
                tool: str = "tool") -> tuple[Receipt, bool]:
    """Notarize the ``n``th digest through the real write path."""
    return await notary.notarize(account, server, tool, digest(n))


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (``notary serve --workers``' workers), from
    ``/proc``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out
