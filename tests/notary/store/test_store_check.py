"""Damage to a stored log: the full check, the background scrub, and damaged database files.

Stores are real: a notary application (in process, on 127.0.0.1) fills its SQLite database
through ``POST /v1/tool-calls``; the tests then flip one bit in a full interior tile or in an
entry bundle, or break every page of the file, and expect:

- ``notary check`` and ``ledger verify DATA`` to fail (exit 1) naming the damaged tile;
- the scrub of a running ``notary serve`` to find it, report it in ``/healthz`` and
  ``/metrics``, stop writes (503 ``store_corrupt``), and keep them stopped across a restart
  until ``notary check`` passes on a repaired store;
- every command on a file with damaged pages to say which file, what is wrong and what to do,
  exit 2, and never print a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shlex
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ledger.cli.main import main as ledger_cli
from ledger.core.note import Ed25519Signer
from ledger.jobs.scrub import Scrubber
from ledger.log.facade import Log
from ledger.log.sequencer import WriterState
from ledger.process.exitcodes import ExitCode
from ledger.storage.memory import MemoryStore
from notary.cli.main import main as notary_cli
from notary.http.appkeys import NOTARY
from notary.operator.damage_marker import DAMAGE_FILE
from notary.serving.config import Settings
from notary.serving.keys import DB_NAME, Paths
from tests.notary_server import HOST, app_notary, free_port, start_app
from tests.servers import bound_socket
from tests.tamper import flip_tile_bit as flip

ENTRIES = 600  # bundles 0 and 1 and level-0 tiles 0 and 1 are full; tile 0/002 is partial


def cli(main: Callable[[list[str]], int], *argv: str | Path) -> tuple[int, str, str]:
    """A command in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


async def notary_cmd(*argv: str | Path) -> tuple[int, str, str]:
    return await asyncio.to_thread(cli, notary_cli, *argv)


async def ledger_cmd(*argv: str | Path) -> tuple[int, str, str]:
    return await asyncio.to_thread(cli, ledger_cli, *argv)


async def notarize_many(http: aiohttp.ClientSession, url: str, key: str, n: int) -> None:
    async def one(i: int) -> None:
        body = {"server": "srv", "tool": "t", "call_sha256": os.urandom(32).hex()}
        async with http.post(url + "/v1/tool-calls", json=body,
                             headers={"Authorization": f"Bearer {key}"}) as r:
            assert r.status == 201, await r.text()

    for start in range(0, n, 100):
        await asyncio.gather(*(one(i) for i in range(start, min(n, start + 100))))


async def filled_store(data: Path, n: int = ENTRIES) -> None:
    async with app_notary(data, scrub_rate=0) as app, aiohttp.ClientSession() as http:
        await notarize_many(http, app.url, await app.new_api_key(), n)


# Where to flip (level, index, byte) and the tile the check must name. A bundle's byte 5 is in
# its first entry (after the 2-byte length): that leaf no longer matches level-0 tile 001.
DAMAGE = {
    "interior-tile": ((0, 0, 40), "tile/0/000"),
    "entry-bundle": ((-1, 1, 5), "tile/0/001"),
}


@pytest.mark.parametrize("where", list(DAMAGE))
async def test_full_check_catches_interior_damage(tmp_path: Path, where: str) -> None:
    data = tmp_path / "data"
    await filled_store(data)
    db = Paths(data).db
    code, out, err = await notary_cmd("check", "--data", data)
    assert code == ExitCode.OK, err
    assert out.startswith("ok: database pages sound;") and f"at size {ENTRIES}" in out
    code, out, err = await ledger_cmd("verify", data)  # a notary's data directory
    assert code == ExitCode.OK and out.startswith("ok:"), err

    (level, index, offset), named = DAMAGE[where]
    flip(db, level, index, offset)
    code, out, err = await notary_cmd("check", "--data", data)
    assert code == ExitCode.CHECK_FAILED and out == ""
    assert "notary check: FAILED:" in err and named in err and "Traceback" not in err
    code, _, err = await ledger_cmd("verify", data)
    assert code == ExitCode.CHECK_FAILED and "verify FAILED" in err and named in err

    flip(db, level, index, offset)  # repaired
    code, out, err = await notary_cmd("check", "--data", data)
    assert code == ExitCode.OK, err


async def test_ledger_commands_that_write_want_a_ledger_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await filled_store(data, 3)
    code, _, err = await ledger_cmd("add", data, os.devnull)
    assert code == ExitCode.USAGE and "no log in" in err  # never appends to a notary's log


@contextlib.asynccontextmanager
async def serving(data: Path, **settings: Any) -> AsyncIterator[str]:
    """``notary serve`` on an existing data directory, in this process."""
    sock = bound_socket()
    served = await start_app(
        Settings(data=data, listen=f"{HOST}:{sock.getsockname()[1]}", **settings), sock)
    try:
        yield served.url
    finally:
        await served.stop()


async def health(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url + "/healthz") as r:
        assert r.status == 200
        doc: dict[str, Any] = await r.json()
        return doc


async def until(http: aiohttp.ClientSession, url: str,
                ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll /healthz until ``ready`` holds (a bound on waiting, not on speed)."""
    for _ in range(1200):
        doc = await health(http, url)
        if ready(doc):
            return doc
        await asyncio.sleep(0.05)
    raise AssertionError(f"/healthz never got there: {doc}")


async def issue_status(http: aiohttp.ClientSession, url: str, key: str) -> tuple[int, Any]:
    body = {"server": "srv", "tool": "t", "call_sha256": os.urandom(32).hex()}
    async with http.post(url + "/v1/tool-calls", json=body,
                         headers={"Authorization": f"Bearer {key}"}) as r:
        return r.status, await r.json()


@pytest.mark.parametrize("where", list(DAMAGE))
async def test_scrub_finds_damage_in_a_running_server_and_writes_stop(tmp_path: Path,
                                                                      where: str) -> None:
    data = tmp_path / "data"
    await filled_store(data)
    db = Paths(data).db
    (level, index, offset), named = DAMAGE[where]
    key = ""
    async with serving(data, scrub_rate=500) as url, aiohttp.ClientSession() as http:
        code, out, _ = await notary_cmd("apikey", "create", "--data", data, "--account", "test")
        key = out.strip().splitlines()[-1]
        first = await until(http, url, lambda h: h["scrub"]["passes"] >= 1)
        assert first["status"] == "ok" and first["writes"] == "untried"
        assert first["scrub"]["last_pass"]["size"] == ENTRIES and first["scrub"]["damage"] is None
        assert (await issue_status(http, url, key))[0] == 201

        flip(db, level, index, offset)  # while the server runs
        failing = await until(http, url, lambda h: h["status"] == "failing")
        assert failing["writes"] == "stopped" and named in failing["problem"]
        assert named in failing["scrub"]["damage"]

        status, body = await issue_status(http, url, key)
        assert status == 503 and body["error"]["code"] == "store_corrupt"
        async with http.get(url + "/v1/ledger") as r:  # reads go on
            assert r.status == 200
        async with http.get(url + "/metrics") as r:
            metrics = await r.text()
        values = {line.split(" ")[0]: float(line.split(" ")[1]) for line in metrics.splitlines()
                  if line.startswith("ledger_scrub_")}
        assert values["ledger_scrub_damage"] == 1.0
        assert values["ledger_scrub_passes_total"] >= 1
        assert values["ledger_scrub_checked_total"] >= 6  # 3 bundles, 3 tiles a pass at least
    assert named in json.loads((data / DAMAGE_FILE).read_text())["reason"]

    # A restart does not resume writing on the damaged store.
    async with serving(data, scrub_rate=500) as url, aiohttp.ClientSession() as http:
        assert (await health(http, url))["status"] == "failing"
        assert (await issue_status(http, url, key))[0] == 503

    flip(db, level, index, offset)  # the operator restores the store...
    clear = json.loads((data / DAMAGE_FILE).read_text())["clear"]
    program, *command = shlex.split(clear.split("`")[1])  # ... and checks it, as told
    assert program == "notary" and command == ["check", "--data", str(data.resolve())], clear
    code, _, err = await notary_cmd(*command)
    assert code == ExitCode.OK and "cleared the damage" in err
    assert not (data / DAMAGE_FILE).exists()
    async with serving(data, scrub_rate=500) as url, aiohttp.ClientSession() as http:
        assert (await health(http, url))["status"] == "ok"
        assert (await issue_status(http, url, key))[0] == 201


async def test_scrub_off_and_negative_rate(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await filled_store(data, 3)
    async with serving(data, scrub_rate=0) as url, aiohttp.ClientSession() as http:
        doc = await health(http, url)
        assert doc["status"] == "ok" and "scrub" not in doc
    code, _, err = await notary_cmd("serve", "--data", data, "--scrub-rate", "-1",
                                    "--listen", f"{HOST}:{free_port()}")
    assert code == ExitCode.USAGE and "scrub_rate" in err


async def test_a_request_that_hits_a_damaged_page_stops_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    async with app_notary(data, scrub_rate=0) as app, aiohttp.ClientSession() as http:
        key = await app.new_api_key()
        status, receipt = await issue_status(http, app.url, key)
        assert status == 201
        notary = app.app[NOTARY]

        async def damaged(receipt_id: str) -> None:
            raise sqlite3.DatabaseError("database disk image is malformed")

        monkeypatch.setattr(notary.store, "receipt_by_id", damaged)
        async with http.get(f"{app.url}/v1/tool-calls/{receipt['id']}") as r:
            assert r.status == 503 and (await r.json())["error"]["code"] == "store_corrupt"
        doc = await health(http, app.url)
        assert doc["status"] == "failing" and "malformed" in doc["problem"]
        assert (await issue_status(http, app.url, key))[0] == 503


async def test_scrub_treats_a_damaged_page_as_damage() -> None:
    """The scrub reads every page; one SQLite calls malformed is damage, not a retry."""
    store = MemoryStore()
    log = await Log.open(store, signer=Ed25519Signer.generate("scrub.test/log"))
    await log.append_many([b"e%d" % i for i in range(300)])
    found: list[str] = []

    async def broken(keys: Any) -> Any:
        raise sqlite3.DatabaseError("database disk image is malformed")

    store.read_tiles = broken  # type: ignore[method-assign]
    scrub = Scrubber(log, rate=1000, on_damage=found.append)
    await scrub.start()
    for _ in range(200):
        if found:
            break
        await asyncio.sleep(0.01)
    await scrub.close()
    assert found and "malformed" in found[0] and scrub.status.damage == found[0]
    assert log.sequencer is not None and log.sequencer.status.state is WriterState.HALTED
    assert log.sequencer.status.reason == found[0]
    with pytest.raises(Exception, match="malformed"):
        await log.append(b"more")
    await log.close()


# ---------------------------------------------------------------------------------------------
# A database file with damaged pages


def damage_pages(db: Path) -> None:
    """Break the b-tree header of every page but the first (the schema stays readable, every
    table read fails with "database disk image is malformed")."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    raw = bytearray(db.read_bytes())
    for page in range(1, pages):
        raw[page * page_size] = 0xFF
    db.write_bytes(bytes(raw))


def assert_names_file_and_remedy(err: str, db: Path, check: str) -> None:
    assert "Traceback" not in err
    assert str(db) in err and "is damaged (database disk image is malformed)" in err
    assert "restore the newest backup" in err and f"`{check}`" in err


async def test_damaged_notary_database_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    await filled_store(data, 20)
    db = data / DB_NAME
    damage_pages(db)
    # notary serve, as an operator starts it
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTARY_")}
    run = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "notary.cli.main", "serve", "--data", str(data),
                         "--listen", f"{HOST}:{free_port()}"],
        capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == ExitCode.USAGE, run.stderr
    assert_names_file_and_remedy(run.stderr, db, f"notary check --data {data}")
    for argv in (("apikey", "list"), ("apikey", "create", "--account", "a"), ("keys", "rotate")):
        code, _, err = await notary_cmd(*argv, "--data", data)
        assert code == ExitCode.USAGE, (argv, err)
        assert_names_file_and_remedy(err, db, f"notary check --data {data}")
    code, out, err = await notary_cmd("check", "--data", data)
    assert code == ExitCode.CHECK_FAILED and out == ""
    assert "FAILED" in err and "damaged" in err and "Traceback" not in err


async def test_serve_refuses_an_edge_tile_that_does_not_match(tmp_path: Path) -> None:
    """Damage the writer itself reads at start (the right edge): a clear refusal, not a
    traceback."""
    data = tmp_path / "data"
    await filled_store(data, 300)
    flip(Paths(data).db, 0, 1, 3)  # tile 0/001.p/44
    run = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "notary.cli.main", "serve", "--data", str(data),
                         "--listen", f"{HOST}:{free_port()}"],
        capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("NOTARY_")})
    assert run.returncode == ExitCode.USAGE and "Traceback" not in run.stderr, run.stderr
    assert "does not match its signed checkpoint" in run.stderr
    assert f"`notary check --data {data}`" in run.stderr


def test_damaged_ledger_database_file(tmp_path: Path) -> None:
    logdir = tmp_path / "log"
    assert cli(ledger_cli, "init", logdir, "--origin", "example.com/damaged")[0] == 0
    db = logdir / "log.db"
    entries = tmp_path / "entry"
    entries.write_bytes(b"an entry")
    assert cli(ledger_cli, "add", logdir, entries, entries)[0] == 0
    damage_pages(db)
    for argv in (("serve", logdir, "--listen", f"{HOST}:{free_port()}"),
                 ("add", logdir, entries), ("export", logdir, tmp_path / "out")):
        code, _, err = cli(ledger_cli, *argv)
        assert code == ExitCode.USAGE, (argv, err)
        assert err.startswith("ledger: error: ")
        assert_names_file_and_remedy(err, db, f"ledger verify {logdir}")
    code, _, err = cli(ledger_cli, "verify", logdir)
    assert code == ExitCode.CHECK_FAILED and "verify FAILED" in err and "damaged" in err
