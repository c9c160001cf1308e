"""``notary serve --workers N``: N processes on one SQLite log behind one port, a worker that
is SIGKILLed is replaced, and the log they write together is one log."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ledger.core.note import Ed25519Verifier
from notary.core.jwks import Jwks
from notary.core.records import CallRecord, new_salt
from notary.core.verification import verify_receipt
from tests.notary_server import NotaryProcess, child_pids


def notarize(server: NotaryProcess, key: str, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    record = CallRecord(server="srv", tool="t", arguments={"n": n}, result={"content": []},
                        salt=new_salt())
    body = {"server": "srv", "tool": "t", "call_sha256": record.call_sha256()}
    for _ in range(50):  # a connection to a worker that was just killed: try again
        try:
            resp = server.post("/v1/tool-calls", json_body=body, api_key=key)
        except OSError:
            time.sleep(0.1)
            continue
        if resp.status == 503:
            time.sleep(0.1)
            continue
        assert resp.status in (200, 201), resp.body
        return resp.json(), record.to_json()
    raise AssertionError("no answer")


def test_workers_share_one_log_and_replace_a_killed_one(tmp_path: Path) -> None:
    with NotaryProcess(tmp_path / "data", args=("--workers", "2")) as server:
        assert server.proc is not None
        deadline = time.monotonic() + 30
        while len(child_pids(server.proc.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        workers = child_pids(server.proc.pid)
        key = server.create_api_key("w")
        with ThreadPoolExecutor(16) as pool:
            first = list(pool.map(lambda n: notarize(server, key, n), range(200)))
            os.kill(workers[0], signal.SIGKILL)
            second = list(pool.map(lambda n: notarize(server, key, n), range(200, 400)))
        deadline = time.monotonic() + 30  # the supervisor starts a new worker
        while len(now := child_pids(server.proc.pid)) < 2 or workers[0] in now:
            assert time.monotonic() < deadline, now
            time.sleep(0.05)
        got = first + second
        assert sorted(r["ledger"]["index"] for r, _ in got) == list(range(400))
        jwks = Jwks(server.get("/.well-known/jwks.json").json())
        vkey = Ed25519Verifier.from_vkey(server.get("/v1/ledger").json()["vkey"])
        for receipt, record in got:
            verdict = verify_receipt(receipt, record=record, jwks=jwks, log_verifier=vkey)
            assert verdict.valid, json.dumps(verdict.to_json())
        assert server.stop() == 0


def test_workers_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """The same on a PostgreSQL store: the workers share the database's log, one receipt key."""
    with NotaryProcess(tmp_path / "data", args=("--workers", "2", "--database", pg_url)) as server:
        out = server.cli("apikey", "create", "--data", str(server.data_dir), "--database", pg_url,
                         "--account", "w").stdout
        key = out.strip().splitlines()[-1]
        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda n: notarize(server, key, n), range(100)))
        assert sorted(r["ledger"]["index"] for r, _ in got) == list(range(100))
        jwks = Jwks(server.get("/.well-known/jwks.json").json())
        vkey = Ed25519Verifier.from_vkey(server.get("/v1/ledger").json()["vkey"])
        for receipt, record in got:
            verdict = verify_receipt(receipt, record=record, jwks=jwks, log_verifier=vkey)
            assert verdict.valid, json.dumps(verdict.to_json())
        assert server.stop() == 0


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # exited, waiting to be reaped by init


def test_workers_exit_when_their_parent_is_killed(tmp_path: Path) -> None:
    """kill -9 of the supervisor: its workers stop serving and free the port for a new one."""
    server = NotaryProcess(tmp_path / "data", args=("--workers", "2"))
    with server:
        assert server.proc is not None
        deadline = time.monotonic() + 30
        while len(child_pids(server.proc.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        workers = child_pids(server.proc.pid)
        os.kill(server.proc.pid, signal.SIGKILL)  # the parent alone, not its process group
        server.proc.wait(10)
        try:
            deadline = time.monotonic() + 20
            while not all(_gone(w) for w in workers):
                assert time.monotonic() < deadline, "the workers outlived their parent"
                time.sleep(0.05)
        finally:
            for w in workers:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w, signal.SIGKILL)
        server.proc = None
        server.start()  # same port and data directory: nothing holds them any more
        health = server.get("/healthz").json()
        assert (health["status"], health["writes"]) == ("ok", "untried"), health


def test_healthz_says_writes_fail_while_another_writer_holds_the_lock(tmp_path: Path) -> None:
    """A writer that holds the SQLite write lock and does not let go (a stopped worker): every
    write fails with 503, and /healthz says so until a write gets through again."""
    with NotaryProcess(tmp_path / "data") as server:
        key = server.create_api_key("w")
        notarize(server, key, 0)
        db = server.data_dir / "notary.store.sqlite"
        fd = os.open(f"{db}-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # the writer queue, then SQLite's own lock
            conn.execute("BEGIN IMMEDIATE")
            record = CallRecord(server="srv", tool="t", arguments={"n": 1},
                                result={"content": []}, salt=new_salt())
            body = {"server": "srv", "tool": "t", "call_sha256": record.call_sha256()}
            resp = server.post("/v1/tool-calls", json_body=body, api_key=key)
            assert resp.status == 503, resp.body
            health = server.get("/healthz").json()
            assert health["writes"] == "failing" and health["status"] == "failing", health
            assert "write lock" in health["problem"]
        finally:
            conn.close()
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        notarize(server, key, 2)
        assert server.get("/healthz").json()["writes"] == "accepted"


def scraped(server: NotaryProcess) -> dict[str, float]:
    """One scrape of /metrics (a new connection, so any worker may answer): sample -> value."""
    resp = server.get("/metrics")
    assert resp.status == 200, resp.body
    assert 'pid="' not in resp.text, "a per-process series"
    samples: dict[str, float] = {}
    for line in resp.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            assert name not in samples, f"{name} twice in one scrape"
            samples[name] = float(value)
    return samples


def _metrics_dir(worker: int) -> Path:
    env = Path(f"/proc/{worker}/environ").read_bytes().split(b"\0")
    found = [e.split(b"=", 1)[1] for e in env if e.startswith(b"PROMETHEUS_MULTIPROC_DIR=")]
    assert len(found) == 1, "the worker has no metrics directory"
    return Path(found[0].decode())


def test_every_scrape_describes_the_whole_service(tmp_path: Path) -> None:
    """With two workers each scrape reaches one of them, and still counts every worker's
    receipts; a killed worker's counts outlive it (counters never go back), its gauges do not
    linger; the metrics directory is the service's own (0700) and goes when it stops."""
    with NotaryProcess(tmp_path / "data", args=("--workers", "2")) as server:
        assert server.proc is not None
        deadline = time.monotonic() + 30
        while len(child_pids(server.proc.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        workers = child_pids(server.proc.pid)
        key = server.create_api_key("m")
        with ThreadPoolExecutor(8) as pool:
            issued = list(pool.map(lambda n: notarize(server, key, n), range(60)))
        # One COSE receipt: one root signed, by whichever worker answered, in every scrape.
        resp = server.get(f"/v1/tool-calls/{issued[0][0]['id']}/receipt.cose")
        assert resp.status == 200, resp.body

        def every_scrape_shows(issued: int) -> None:
            # The tree size a worker reports is its log's head, which it re-reads from the
            # store at most every 0.2 s (Log.head): the other worker's last commit may take
            # that long to show in its scrapes.
            time.sleep(0.3)
            for _ in range(12):
                got = scraped(server)
                assert got["notary_receipts_issued_total"] == issued, got
                assert got["ledger_tree_size"] == issued, got
                assert got['notary_http_requests_total{method="POST",route="/v1/tool-calls",'
                           'status="201"}'] == issued, got
                assert got["ledger_writer_refusing"] == 0, got
                assert got['notary_cose_roots_signed_total{alg="EdDSA"}'] == 1, got
                assert got['notary_cose_roots_signed_total{alg="ML-DSA-44"}'] == 0, got

        every_scrape_shows(60)
        metrics_dir = _metrics_dir(workers[0])
        assert metrics_dir == _metrics_dir(workers[1])
        assert metrics_dir.stat().st_mode & 0o777 == 0o700
        os.kill(workers[0], signal.SIGKILL)
        deadline = time.monotonic() + 30  # the supervisor starts a new worker
        while len(now := child_pids(server.proc.pid)) < 2 or workers[0] in now:
            assert time.monotonic() < deadline, now
            time.sleep(0.05)
        every_scrape_shows(60)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: notarize(server, key, n), range(60, 90)))
        every_scrape_shows(90)
        assert server.stop() == 0
    assert not metrics_dir.exists()
