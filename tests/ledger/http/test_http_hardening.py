"""Hostile clients against real servers on 127.0.0.1.

Each test reproduces an attack as it was reported, mostly with raw sockets, since the requests
that broke the server are ones no HTTP client library would send: bare LF line ends, obs-fold,
an HTTP/1.0 body without Content-Length, ``Transfer-Encoding: xchunked``, connections that never
finish their head or body, more connections than the process has file descriptors.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import resource
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from ledger.http.server import Listener, ServerLimits
from tests.notary_server import HOST, NotaryProcess
from tests.waiting import wait_until

BODY_MARKER = "BODYSECRET"


# --- helpers ------------------------------------------------------------------------------------


def exchange(port: int, data: bytes, *, timeout: float = 15.0) -> bytes:
    """Send ``data`` and read until the server closes (every error response closes)."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(data)
        return read_until_closed(s, timeout)


def read_until_closed(s: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection; TimeoutError if it never
    does within ``timeout`` (the assertion that a server-side timeout closed it)."""
    s.settimeout(timeout)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk
    raise TimeoutError(f"the server kept the connection open for {timeout} s; got {out[:200]!r}")


def parse(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body) of the first response in ``raw``."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = body[: int(headers["content-length"])]
    return status, headers, body


def json_error_of(raw: bytes) -> tuple[int, str]:
    status, headers, body = parse(raw)
    assert headers.get("content-type", "").startswith("application/json"), raw[:300]
    return status, json.loads(body)["error"]["code"]


def log_records(stderr: bytes) -> list[dict[str, Any]]:
    """Every stderr line as JSON: a line that is not JSON fails the test."""
    records = []
    for line in stderr.decode().splitlines():
        assert line.startswith("{"), f"a log line is not JSON: {line[:200]!r}"
        records.append(json.loads(line))
    return records


def events(stderr: bytes, name: str) -> list[dict[str, Any]]:
    return [r for r in log_records(stderr) if r.get("event") == name]


def issue(server: NotaryProcess, key: str, seed: str, *, timeout: float = 30.0) -> int:
    digest = hashlib.sha256(seed.encode()).hexdigest()
    return server.post("/v1/tool-calls", api_key=key, timeout=timeout,
                       json_body={"server": "srv", "tool": "t", "call_sha256": digest}).status


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotaryProcess]:
    """A notary whose stderr (its JSON log) is kept apart, for tests that read it."""
    base = tmp_path_factory.mktemp("hardening")
    with NotaryProcess(base / "notary-data", split_stderr=True) as server:
        yield server


@pytest.fixture(scope="module")
def quiet_key(quiet: NotaryProcess) -> str:
    return quiet.create_api_key("hardening")


# --- item 2: no request byte ever reaches a log -------------------------------------------------


def _attacks(key: str) -> dict[str, bytes]:
    body = json.dumps({"server": "s", "tool": "t",
                       "call_sha256": BODY_MARKER + "a" * 54}).encode()
    auth = b"Authorization: Bearer " + key.encode()
    return {
        "bare-lf": b"POST /v1/tool-calls HTTP/1.1\nHost: x\n" + auth
        + b"\nContent-Length: %d\n\n" % len(body) + body,
        "obs-fold": b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\n" + auth
        + b"\r\nX-Folded: a\r\n  " + BODY_MARKER.encode()
        + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
        "http10-no-length": b"POST /v1/tool-calls HTTP/1.0\r\nHost: x\r\n" + auth + b"\r\n\r\n"
        + body,
        "xchunked": b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\n" + auth
        + b"\r\nTransfer-Encoding: xchunked\r\n\r\n" + body,
        "bad-header-char": b"POST /v1/tool-calls HTTP/1.1\r\nHost: x\r\n" + auth
        + b"\r\nX-Bad\x01: " + BODY_MARKER.encode() + b"\r\n\r\n",
        "garbage-method": b"P\x00ST /v1/tool-calls?" + BODY_MARKER.encode() + b" HTTP/1.1\r\n"
        + auth + b"\r\n\r\n",
    }


@pytest.mark.parametrize("parser", ["c", "python"])
def test_protocol_errors_are_json_and_reach_no_log(tmp_path: Path, parser: str) -> None:
    """Each malformed request gets a JSON 400; stderr stays JSON lines with neither the key nor
    the body in it, whichever of aiohttp's two HTTP parsers is in use."""
    env = {"AIOHTTP_NO_EXTENSIONS": "1"} if parser == "python" else None
    server = NotaryProcess(tmp_path / "notary-data", split_stderr=True, env=env)
    with server:
        key = server.create_api_key("attacked")
        secret = key[16:]  # nk_<12 hex key id>_<secret>
        for name, raw in _attacks(key).items():
            reply = exchange(server.port, raw)
            status, code = json_error_of(reply)
            assert status == 400, (name, reply[:300])
            assert code in ("bad_request", "invalid_json"), (name, code)
            assert secret.encode() not in reply, name
        for _ in range(40):  # a flood of them is still a few lines (rate-limited)
            exchange(server.port, _attacks(key)["bare-lf"])
        assert server.get("/healthz").status == 200
    stderr = server.stderr_bytes()
    everything = stderr + server.log_path.read_bytes()
    assert secret.encode() not in everything
    assert BODY_MARKER.encode() not in everything
    assert b"Traceback" not in everything
    lines = events(stderr, "http_protocol_error")
    assert 1 <= len(lines) <= 5, lines
    assert all(r["level"] == "info" and r["status"] == 400 for r in lines)


def test_ledger_serve_protocol_errors_are_json_and_quiet(tmp_path: Path) -> None:
    """``ledger serve`` runs the same server: a malformed request is a JSON 400, not logged raw."""
    logdir = tmp_path / "log"
    subprocess.run([sys.executable, "-m", "ledger.cli.main", "init", str(logdir),
                    "--origin", "example.com/hardening"], check=True, capture_output=True)
    with ledger_serving(logdir) as (port, stderr):
        reply = exchange(port, b"GET /checkpoint?" + BODY_MARKER.encode()
                         + b" HTTP/1.1\nHost: x\n\n")
        assert json_error_of(reply) == (400, "bad_request")
    assert BODY_MARKER.encode() not in stderr.read_bytes()
    log_records(stderr.read_bytes())


@contextlib.contextmanager
def ledger_serving(logdir: Path) -> Iterator[tuple[int, Path]]:
    """``ledger serve`` on a free loopback port: (port, path of its stderr)."""
    err = logdir.parent / "ledger-serve.stderr"
    with err.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "ledger.cli.main", "serve", str(logdir),
                                 "--listen", f"{HOST}:0"], stdout=subprocess.PIPE, stderr=sink)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith(f"http://{HOST}:"), err.read_text()
        yield int(url.rsplit(":", 1)[1]), err
    finally:
        proc.terminate()
        proc.wait(20)
    assert proc.returncode == 0, err.read_text()


# --- item 7: tile indexes longer than int() takes -----------------------------------------------


def _huge_tile_paths() -> list[str]:
    groups = 1434  # 4,302 digits: past int()'s 4,300-digit limit, within the request-line limit
    index = "x123/" * (groups - 1) + "456"
    return [f"/tile/0/{index}", f"/tile/entries/{index}", f"/tile/1/{index}.p/5"]


def test_huge_tile_index_is_400_on_notary_serve(quiet: NotaryProcess) -> None:
    for path in _huge_tile_paths():
        resp = quiet.get(path)
        assert resp.status == 400, (path[:40], resp.status, resp.body[:200])
        assert resp.json()["error"]["code"] == "bad_tile_path"
    assert quiet.get("/healthz").status == 200
    assert b"Traceback" not in quiet.stderr_bytes()
    assert not events(quiet.stderr_bytes(), "unhandled_error")


def test_huge_tile_index_is_400_on_ledger_serve(tmp_path: Path) -> None:
    logdir = tmp_path / "log"
    subprocess.run([sys.executable, "-m", "ledger.cli.main", "init", str(logdir),
                    "--origin", "example.com/tiles"], check=True, capture_output=True)
    with ledger_serving(logdir) as (port, stderr):
        for path in _huge_tile_paths():
            reply = exchange(port, f"GET {path} HTTP/1.1\r\nHost: x\r\n"
                             "Connection: close\r\n\r\n".encode())
            assert json_error_of(reply) == (400, "bad_tile_path"), path[:40]
    assert b"Traceback" not in stderr.read_bytes()


# --- item 9: parsing as strict as the README says -----------------------------------------------


def _issue_raw(server: NotaryProcess, body: bytes, key: str, scheme: str = "Bearer"
               ) -> tuple[int, dict[str, str], Any]:
    resp = server.request("POST", "/v1/tool-calls", body=body,
                          headers={"Content-Type": "application/json",
                                   "Authorization": f"{scheme} {key}"})
    return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.json()


def test_duplicate_keys_bom_and_utf16_are_refused(quiet: NotaryProcess, quiet_key: str) -> None:
    digest = secrets.token_hex(32)
    good = json.dumps({"server": "s", "tool": "t", "call_sha256": digest})
    dup = ('{"server": "s", "tool": "t", "call_sha256": "' + "0" * 64
           + '", "call_sha256": "' + digest + '"}')
    for body in (dup.encode(), b"\xef\xbb\xbf" + good.encode(), good.encode("utf-16"),
                 good.encode("utf-16-le"), good.encode("utf-32")):
        status, _, err = _issue_raw(quiet, body, quiet_key)
        assert (status, err["error"]["code"]) == (400, "invalid_json"), (body[:20], err)
    # Nothing was notarized by the refused bodies.
    assert quiet.get(f"/v1/tool-calls?call_sha256={digest}").status == 404
    # Inside a record too (verify parses the body in a worker process).
    rec_dup = b'{"id": "tc_AAAAAAAAAAAAAAAAAAAAAA", "record": {"tool": "a", "tool": "b"}}'
    resp = quiet.post("/v1/tool-calls/verify", body=rec_dup,
                      headers={"Content-Type": "application/json"})
    assert (resp.status, resp.json()["error"]["code"]) == (400, "invalid_json")
    assert "duplicate" in resp.json()["error"]["message"]


def test_bearer_scheme_is_case_insensitive(quiet: NotaryProcess, quiet_key: str) -> None:
    for scheme in ("bearer", "BEARER", "BeArEr"):
        body = json.dumps({"server": "s", "tool": "t",
                           "call_sha256": secrets.token_hex(32)}).encode()
        status, _, receipt = _issue_raw(quiet, body, quiet_key, scheme)
        assert status == 201, (scheme, receipt)


def test_401_carries_a_bearer_challenge(quiet: NotaryProcess, quiet_key: str) -> None:
    body = json.dumps({"server": "s", "tool": "t", "call_sha256": "0" * 64}).encode()
    cases = [("Bearer", "nk_000000000000_" + "A" * 43), ("Basic", "dTpw"),
             ("Bearer", quiet_key[:-1] + ("A" if quiet_key[-1] != "A" else "B"))]
    for scheme, key in cases:
        status, headers, err = _issue_raw(quiet, body, key, scheme)
        assert (status, err["error"]["code"]) == (401, "unauthorized")
        assert headers["www-authenticate"].startswith("Bearer "), headers
    resp = quiet.post("/v1/tool-calls", body=body, headers={"Content-Type": "application/json"})
    assert resp.status == 401 and resp.header("WWW-Authenticate").startswith("Bearer ")


# --- item 10: a client gone mid-body is neither an error line nor a 500 -------------------------


def _requests_total(server: NotaryProcess, route: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in server.get("/metrics").text.splitlines():
        if line.startswith("notary_http_requests_total{") and f'route="{route}"' in line:
            status = line.split('status="', 1)[1].split('"', 1)[0]
            out[status] = out.get(status, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def test_client_disconnect_mid_body_is_not_a_500(quiet: NotaryProcess, quiet_key: str) -> None:
    before = _requests_total(quiet, "/v1/tool-calls")
    for path, auth in (("/v1/tool-calls", f"Authorization: Bearer {quiet_key}\r\n"),
                       ("/v1/tool-calls/verify", "")):
        with socket.create_connection((HOST, quiet.port)) as s:
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json"
                      "\r\nContent-Length: 5000\r\n\r\n{\"server\": ".encode())
            time.sleep(0.3)  # let the handler start reading the body
    deadline = time.monotonic() + 20
    while _requests_total(quiet, "/v1/tool-calls").get("499", 0) <= before.get("499", 0):
        assert time.monotonic() < deadline, "the disconnect was never counted"
        time.sleep(0.1)
    after = _requests_total(quiet, "/v1/tool-calls")
    assert after.get("500", 0) == before.get("500", 0)
    assert _requests_total(quiet, "/v1/tool-calls/verify").get("500", 0) == 0
    stderr = quiet.stderr_bytes()
    assert b"Traceback" not in stderr
    assert not events(stderr, "unhandled_error") and not events(stderr, "http_handler_error")


# --- item 3: file descriptors, idle and slow connections ----------------------------------------


@contextlib.contextmanager
def raised_nofile(want: int) -> Iterator[None]:
    """This process may hold ``want`` descriptors (for the attacking sockets)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.fail(f"the test needs {want} file descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_fd_exhaustion_does_not_stop_service(tmp_path: Path) -> None:
    """1,100 idle connections under a 1,024-descriptor limit: receipts keep being issued, and
    the log stays a few lines (the report: no service and 54 MB of tracebacks in 30 s)."""
    server = NotaryProcess(tmp_path / "notary-data", split_stderr=True, nofile=1024)
    with raised_nofile(1400), server:
        key = server.create_api_key("fd")
        attackers: list[socket.socket] = []
        try:
            for i in range(1100):
                s = socket.create_connection((HOST, server.port), timeout=10)
                if i % 3 == 1:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # a head never finished
                attackers.append(s)
            for n in range(5):
                assert issue(server, key, f"fd-{n}") == 201
        finally:
            for s in attackers:
                s.close()
        assert issue(server, key, "fd-after") == 201
    stderr = server.stderr_bytes()
    assert b"Traceback" not in stderr and b"EMFILE" not in stderr
    assert len(stderr) < 20_000, f"{len(stderr)} bytes of log"
    assert len(events(stderr, "connection_limit_reached")) <= 5
    listening = events(stderr, "listening")[0]
    assert 0 < listening["max_connections"] < 1024


def test_accept_failures_back_off_and_recover(tmp_path: Path) -> None:
    """When descriptors run out anyway (the limit lowered under the running server), accepting
    backs off with one log line per interval instead of spinning, and service resumes."""
    server = NotaryProcess(tmp_path / "notary-data", split_stderr=True)
    with raised_nofile(400), server:
        key = server.create_api_key("emfile")
        assert server.proc is not None
        pid = server.proc.pid
        limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        held: list[socket.socket] = []
        try:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (48, limits[1]))
            for _ in range(120):
                held.append(socket.create_connection((HOST, server.port), timeout=10))
            # The accept loop fails with EMFILE and backs off; its first (throttled) line says so.
            wait_until(lambda: bool(events(server.stderr_bytes().rpartition(b"\n")[0],
                                           "accept_failed")),  # whole lines only
                       "the accept loop to run out of descriptors", 30)
            during = server.stderr_bytes()
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
            for s in held:
                s.close()
        assert issue(server, key, "emfile-after") == 201
    failures = events(during, "accept_failed")
    assert 1 <= len(failures) <= 3, failures
    assert failures[0]["errno"] == "EMFILE"
    assert len(during) < 20_000 and b"Traceback" not in server.stderr_bytes()


def test_idle_and_slow_connections_are_closed_by_their_timeouts(tmp_path: Path) -> None:
    """Idle keep-alive, unfinished head and unfinished (authenticated) body: each connection is
    closed once its timeout passes, the last two with a JSON 408."""
    server = NotaryProcess(tmp_path / "notary-data", split_stderr=True,
                           args=("--keepalive-timeout", "1", "--header-timeout", "1",
                                 "--body-timeout", "1"))
    with server:
        key = server.create_api_key("slow")
        # Idle after one request on a keep-alive connection: closed without a word.
        with socket.create_connection((HOST, server.port)) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            first = read_response(s)
            assert parse(first)[0] == 200
            assert read_until_closed(s, 20) == b""
        # Connected, nothing sent: closed.
        with socket.create_connection((HOST, server.port)) as s:
            assert read_until_closed(s, 20) == b""
        # A head that never ends: 408, closed.
        with socket.create_connection((HOST, server.port)) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1")
            assert json_error_of(read_until_closed(s, 20)) == (408, "request_timeout")
        # A body that never ends, even with a valid key: 408, closed.
        for path, auth in (("/v1/tool-calls", f"Authorization: Bearer {key}\r\n"),
                           ("/v1/tool-calls/verify", "")):
            with socket.create_connection((HOST, server.port)) as s:
                s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 100\r\n"
                          "Content-Type: application/json\r\n\r\n{\"server\"".encode())
                assert json_error_of(read_until_closed(s, 20)) == (408, "request_timeout")
        assert issue(server, key, "slow-after") == 201
    stderr = server.stderr_bytes()
    assert b"Traceback" not in stderr and not events(stderr, "unhandled_error")
    assert {r["phase"] for r in events(stderr, "slow_client_closed")} == {"header", "body"}


def read_response(s: socket.socket) -> bytes:
    """One complete response with a Content-Length body from a kept-alive connection."""
    s.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    _, headers, body = parse(data)
    while len(body) < int(headers["content-length"]):
        data += s.recv(65536)
        _, _, body = parse(data)
    return data


async def test_keep_alive_requests_schedule_no_timer_each(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """The connection timers are lazy: a deadline that moves later leaves the pending timer
    alone, so requests on a keep-alive connection schedule no timer each; an idle connection
    is still closed once its (latest) deadline passes."""
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    assert runner.server is not None
    limits = ServerLimits(keepalive_timeout=0.5, header_timeout=5, body_timeout=5)
    listener = Listener(runner.server, limits, max_connections=16)
    [(_, port)] = await listener.start(HOST, 0)
    loop = asyncio.get_running_loop()
    scheduled: list[float] = []
    real_call_at = loop.call_at

    def counting_call_at(when: float, callback: Any, *args: Any, **kw: Any
                         ) -> asyncio.TimerHandle:
        scheduled.append(when)
        return real_call_at(when, callback, *args, **kw)

    try:
        reader, writer = await asyncio.open_connection(HOST, port)
        for _ in range(3):  # the first request or two may move the deadline earlier
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await reader.readuntil(b"ok")
        monkeypatch.setattr(loop, "call_at", counting_call_at)
        for _ in range(100):
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await reader.readuntil(b"ok")
        assert len(scheduled) <= 2, scheduled  # at most a re-arm when a timer fired
        assert await asyncio.wait_for(reader.read(), 30) == b""  # idle: closed by the server
        writer.close()
    finally:
        await listener.close()
        await runner.cleanup()
