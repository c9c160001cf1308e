"""A notary restarted on a database restored from an older backup: it remembers the newest
checkpoint it saw committed (``seen-checkpoint.json``), serves reads, refuses writes with a
clear 503 and a metric instead of forking the log (and ``/healthz`` says so before any write is
asked for), and writes again once the database is back."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from notary.core.records import CallRecord, new_salt
from notary.serving.keys import Paths
from tests.notary_server import NotaryProcess


def post(server: NotaryProcess, key: str, n: int) -> tuple[int, dict[str, object]]:
    rec = CallRecord(server="srv", tool="t", arguments={"n": n}, result={"content": []},
                     salt=new_salt())
    resp = server.post("/v1/tool-calls", api_key=key, json_body={
        "server": "srv", "tool": "t", "call_sha256": rec.call_sha256()})
    return resp.status, resp.json()


def snapshot(db: Path, to: Path) -> None:
    src, dst = sqlite3.connect(db), sqlite3.connect(to)
    src.backup(dst)
    src.close()
    dst.close()


def restore(db: Path, backup: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    shutil.copyfile(backup, db)


def metric(server: NotaryProcess, name: str) -> float:
    for line in server.get("/metrics").body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def test_restored_database_stops_writes_until_it_is_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = NotaryProcess(data).start()
    try:
        key = server.create_api_key("a")
        db = Paths(data).db
        for n in range(3):
            assert post(server, key, n)[0] == 201
        snapshot(db, tmp_path / "old.db")  # a backup at size 3
        for n in range(3, 8):
            assert post(server, key, n)[0] == 201
        server.stop()
        snapshot(db, tmp_path / "new.db")
        restore(db, tmp_path / "old.db")  # the operator restores the older backup
        server.start()
        # Known as it started, before any write was asked for: /healthz says so at once.
        health = server.get("/healthz")
        assert health.status == 200, health.body
        doc = health.json()
        assert (doc["status"], doc["writes"]) == ("failing", "refused"), doc
        assert "size 8" in doc["problem"]
        status, body = post(server, key, 100)
        assert status == 503, body
        error = body["error"]
        assert isinstance(error, dict) and error["code"] == "log_refusing"
        assert "size 8" in str(error["message"])
        assert metric(server, "ledger_writer_refusing") == 1
        assert server.get("/checkpoint").status == 200  # reads go on
        server.stop()
        restore(db, tmp_path / "new.db")  # the right database is back
        server.start()
        # Nothing refuses, but no write was tried yet: not claimed to be accepted.
        doc = server.get("/healthz").json()
        assert (doc["status"], doc["writes"]) == ("ok", "untried") and "last_commit" not in doc
        assert post(server, key, 101)[0] == 201
        doc = server.get("/healthz").json()
        assert (doc["status"], doc["writes"]) == ("ok", "accepted"), doc
        committed = datetime.fromisoformat(doc["last_commit"])
        assert abs((datetime.now(UTC) - committed).total_seconds()) < 60
        assert metric(server, "ledger_writer_refusing") == 0
    finally:
        server.stop()
