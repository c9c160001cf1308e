"""Unauthenticated verification cannot starve notarization (benchmarks/docs/verify_flood.md
measures it).

The admission rules are checked with a fake clock; the flood runs against a real server. The
"notarization p50 stays within 2x of idle" figure is a measurement, not a test: it lives in
benchmarks/verify_flood.py.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import secrets
import threading
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from notary.core.records import CallRecord, new_salt
from notary.http.verify_pool import BURST_SECONDS, Refused, VerifyPool
from tests.notary_server import HOST, NotaryProcess


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _refusal(e: pytest.ExceptionInfo[Refused]) -> tuple[int, str, int]:
    return e.value.status, e.value.code, int(e.value.headers["Retry-After"])


def _refused(pool: VerifyPool, enter: Callable[[], AbstractContextManager[None]]
             ) -> pytest.ExceptionInfo[Refused]:
    with pytest.raises(Refused) as e, enter():
        pass
    return e


def test_per_client_and_global_concurrency() -> None:
    pool = VerifyPool(workers=1, queue=2, per_client=2, budget=1.0, clock=Clock())
    with pool.admit("a"), pool.admit("a"):
        assert _refusal(_refused(pool, lambda: pool.admit("a"))) == (
            429, "verify_rate_limited", 1)
        with pool.admit("b"):  # another address still gets in
            pass
    # The server's places (workers + queue = 3) are counted apart, for work in progress.
    with pool.working(), pool.working(), pool.working():
        assert _refusal(_refused(pool, pool.working)) == (429, "verify_rate_limited", 1)
        with pool.admit("c"):  # clients are still admitted to send their bodies
            pass
    with pool.admit("a"), pool.working():  # everything is given back
        pass
    assert pool.refused == 2


def test_work_budget_per_client() -> None:
    clock = Clock()
    pool = VerifyPool(workers=1, queue=8, per_client=4, budget=0.5, clock=clock)
    with pool.admit("greedy"):
        pool.charge("greedy", 0.5 * BURST_SECONDS + 2.0)  # its burst and 2 s more of CPU
    e = _refused(pool, lambda: pool.admit("greedy"))
    assert _refusal(e) == (429, "verify_rate_limited", 4)  # 2 s of work at 0.5 s per second
    assert not e.value.ignored_retry_after  # told politely, the first time
    clock.now += 1
    e = _refused(pool, lambda: pool.admit("greedy"))  # sent again before Retry-After
    assert e.value.ignored_retry_after  # its body will not be read
    with pool.admit("modest"):
        pass
    clock.now += 4
    with pool.admit("greedy"):  # refilled
        pass


def big_record(target: int = 62_000) -> CallRecord:
    """A call record of about ``target`` bytes of JSON, much of it small values to canonicalize."""
    rows = []
    while len(json.dumps(rows)) < target:
        i = len(rows)
        rows.append({"id": i, "name": f"item-{i}", "tags": ["a", "b", str(i)],
                     "score": i * 1.5, "ok": i % 2 == 0})
    return CallRecord(server="srv", tool="export", arguments={"query": "all"},
                      result={"content": [{"type": "text", "text": "done"}],
                              "structuredContent": {"rows": rows}}, salt=new_salt())


def _post(conn: http.client.HTTPConnection, path: str, body: bytes,
          headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    data = resp.read()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, json.loads(data)


def test_a_verify_flood_leaves_notarization_working(tmp_path: Path) -> None:
    server = NotaryProcess(tmp_path / "notary-data", split_stderr=True)
    with server:
        key = server.create_api_key("flood")
        rec = big_record()
        receipt = server.post("/v1/tool-calls", api_key=key, json_body={
            "server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()}).json()
        verify_body = json.dumps({"id": receipt["id"], "record": rec.to_json()}).encode()
        assert len(verify_body) > 60_000

        verdicts: list[tuple[int, dict[str, str], Any]] = []
        issued: list[int] = []
        lock = threading.Lock()
        start = threading.Barrier(17)

        def flood() -> None:
            """Verifies back to back, ignoring Retry-After: after the first 429 such a client
            may find its connection closed unread (a reset), and reconnects."""
            conn = http.client.HTTPConnection(HOST, server.port, timeout=60)
            start.wait()
            for _ in range(12):
                try:
                    result = _post(conn, "/v1/tool-calls/verify", verify_body, {})
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = http.client.HTTPConnection(HOST, server.port, timeout=60)
                    result = (0, {}, None)
                with lock:
                    verdicts.append(result)
            conn.close()

        def notarize() -> None:
            conn = http.client.HTTPConnection(HOST, server.port, timeout=60)
            start.wait()
            for _ in range(20):
                digest = hashlib.sha256(secrets.token_bytes(16)).hexdigest()
                status, _, _ = _post(conn, "/v1/tool-calls", json.dumps(
                    {"server": "s", "tool": "t", "call_sha256": digest}).encode(),
                    {"Authorization": f"Bearer {key}"})
                issued.append(status)
            conn.close()

        threads = [threading.Thread(target=flood) for _ in range(16)]
        threads.append(threading.Thread(target=notarize))
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert issued == [201] * 20  # every notarization went through during the flood

        statuses = Counter(status for status, _, _ in verdicts)
        assert len(verdicts) == 16 * 12 and set(statuses) <= {200, 429, 0}, statuses
        assert statuses[429] > 0 and statuses[200] > 0, statuses
        for status, headers, body in verdicts:
            if status == 200:
                assert body["valid"] is True, body
            elif status == 429:
                assert body["error"]["code"] == "verify_rate_limited"
                assert int(headers["retry-after"]) >= 1

        # The verification ran in a worker process, not on the server's event loop.
        assert server.proc is not None
        children = [c for task in Path(f"/proc/{server.proc.pid}/task").iterdir()
                    for c in (task / "children").read_text().split()]
        assert children, "no verification worker process"
    assert b"Traceback" not in server.stderr_bytes()
