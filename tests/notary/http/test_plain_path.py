"""``POST /v1/tool-calls`` answers the same on the plain path and through aiohttp.

Two real ``notary serve`` processes, one with the plain path (the default) and one with
``fast_path = off``, get the same raw requests; every refusal must come back byte for byte the
same (but the ``Date``), and a receipt with the same status, the same headers in the same order
and the same members. The metrics count both paths alike.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from ledger.client.framing import Response, ResponseParser
from tests.notary_server import HOST, NotaryProcess

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, tuple[NotaryProcess, str, str]]]:
    """{"plain" | "aiohttp": (server, API key, key of an account with an allowance of 1)}."""
    base = tmp_path_factory.mktemp("plain-path")
    with NotaryProcess(base / "plain") as plain, NotaryProcess(
            base / "aiohttp", env={"NOTARY_FAST_PATH": "off"}) as other:
        yield {name: (server, server.create_api_key("a"), server.create_api_key("q", 1))
               for name, server in (("plain", plain), ("aiohttp", other))}


def exchange(server: NotaryProcess, data: bytes, count: int = 1) -> list[tuple[bytes, Response]]:
    """(raw bytes, parsed) of ``count`` answers to ``data`` sent on one connection."""
    with socket.create_connection((HOST, server.port), timeout=20) as s:
        s.sendall(data)
        parser = ResponseParser(max_body=1 << 20)
        raw = b""
        answers: list[Response] = []
        while len(answers) < count:
            chunk = s.recv(65536)
            assert chunk, "the server closed the connection early"
            raw += chunk
            parser.feed(chunk)
            while (resp := parser.next()) is not None:
                answers.append(resp)
    parts = raw.split(b"HTTP/1.1 ")[1:]
    return [(b"HTTP/1.1 " + p, a) for p, a in zip(parts, answers, strict=True)]


def without_date(raw: bytes) -> bytes:
    """The answer without what depends on the second it was sent: the ``Date`` header, and
    the seconds of ``Retry-After`` (until the next UTC month), in which two answers sent
    either side of a second's turn differ."""
    lines = []
    for line in raw.split(b"\r\n"):
        if line.lower().startswith(b"date: "):
            continue
        if line.lower().startswith(b"retry-after: "):
            assert line.split(b": ", 1)[1].isdigit(), line
            line = b"Retry-After: (seconds)"
        lines.append(line)
    return b"\r\n".join(lines)


def issue(body: bytes | str, key: str | None, *extra: str) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    lines = ["POST /v1/tool-calls HTTP/1.1", f"Host: {HOST}", f"Content-Length: {len(data)}",
             "Content-Type: application/json", *extra]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def call(digest: str, server: str = "s", tool: str = "t") -> str:
    return json.dumps({"server": server, "tool": tool, "call_sha256": digest})


def test_refusals_are_byte_for_byte_the_same(
        servers: dict[str, tuple[NotaryProcess, str, str]]) -> None:
    def cases(key: str, quota_key: str) -> list[bytes]:
        return [
            issue(call("1" * 64), None),  # no key: 401 with the Bearer challenge
            issue(call("1" * 64), "nk_000000000000_" + "A" * 43),  # unknown key
            issue(call("1" * 64), key[:-1] + ("A" if key[-1] != "A" else "B")),  # wrong secret
            issue("{not json", key),
            issue("[]", key),
            issue('{"server": "s", "tool": "t", "call_sha256": "' + "1" * 64 + '", "x": 1}', key),
            issue('{"server": "s", "tool": "t"}', key),
            issue(call("1" * 63), key),
            issue(call("A" * 64), key),
            issue(call("1" * 64, server=""), key),
            issue(call("1" * 64, tool="\u0007"), key),
            issue(b'{"server": "s", "server": "s", "tool": "t", "call_sha256": "1"}', key),
            issue(b"\xef\xbb\xbf" + call("1" * 64).encode(), key),
            # The quota account notarizes under a server name of its own ("s" is key's).
            issue(call("2" * 64, server="qs"), quota_key),  # spends the allowance of 1 ...
            issue(call("3" * 64, server="qs"), quota_key),  # ... so this is 429
            # A known digest for another tool: 409 (digest_conflict; for another account's
            # key it would be digest_taken).
            issue(call("2" * 64, server="qs", tool="other"), quota_key),
        ]

    got = {}
    for name, (server, key, quota_key) in servers.items():
        got[name] = [exchange(server, data)[0] for data in cases(key, quota_key)]
    statuses = [a.status for _, a in got["plain"]]
    assert statuses == [401, 401, 401, 400, 400, 400, 400, 400, 400, 400, 400, 400, 400, 201,
                        429, 409]
    for (raw_plain, plain), (raw_other, _) in zip(got["plain"], got["aiohttp"], strict=True):
        if plain.status == 201:  # a receipt: compared below
            continue
        assert without_date(raw_plain) == without_date(raw_other)


def test_receipts_have_the_same_shape(
        servers: dict[str, tuple[NotaryProcess, str, str]]) -> None:
    seen = {}
    for name, (server, key, _) in servers.items():
        (raw_new, new), (raw_again, again) = exchange(
            server, issue(call("4" * 64), key) + issue(call("4" * 64), key), 2)
        assert (new.status, again.status) == (201, 200)
        heads = [[line.split(b":", 1)[0] for line in without_date(raw).split(b"\r\n\r\n")[0]
                  .split(b"\r\n")[1:]] for raw in (raw_new, raw_again)]
        body = json.loads(new.body)
        assert json.loads(again.body)["id"] == body["id"]
        seen[name] = (heads, sorted(body), raw_new.split(b"\r\n", 1)[0])
    assert seen["plain"] == seen["aiohttp"]


def _count(server: NotaryProcess, status: str) -> float:
    total = 0.0
    for line in server.get("/metrics").text.splitlines():
        if (line.startswith("notary_http_requests_total{") and 'route="/v1/tool-calls"' in line
                and 'method="POST"' in line and f'status="{status}"' in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _issued(server: NotaryProcess) -> float:
    lines = [line for line in server.get("/metrics").text.splitlines()
             if line.startswith("notary_receipts_issued_total ")]
    return float(lines[0].split()[1])


def test_the_plain_path_is_counted_like_aiohttps(
        servers: dict[str, tuple[NotaryProcess, str, str]]) -> None:
    server, key, _ = servers["plain"]
    before = (_count(server, "201"), _count(server, "400"), _issued(server))
    exchange(server, issue(call("5" * 64), key) + issue("{", key), 2)
    after = (_count(server, "201"), _count(server, "400"), _issued(server))
    assert after == (before[0] + 1, before[1] + 1, before[2] + 1)
