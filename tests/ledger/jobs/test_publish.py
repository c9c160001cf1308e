"""``--publish DIR``: a static tlog-tiles tree kept up to date as the log grows, which an
ordinary web server serves to the monitor as well as the log itself would."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from ledger.cli.monitor import register, run
from ledger.core.note import Ed25519Signer
from ledger.core.tiles import tiles_for_size
from ledger.jobs.export import ExportError, export_log
from ledger.jobs.publish import Publisher
from ledger.log.facade import Log
from ledger.process.exitcodes import ExitCode
from ledger.storage.memory import MemoryStore
from tests.notary_server import NotaryProcess, live_notary
from tests.verifying import saved, statuses, verify

ORIGIN = "publish.test/log"


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


async def static_server(directory: Path) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_static("/", directory)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def monitor(url: str, vkey: str, tmp: Path) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    args = parser.parse_args(["monitor", "--log", url, "--vkey", vkey, "--audit", "--once",
                              "--state", str(tmp / "state.json"),
                              "--evidence-dir", str(tmp / "evidence")])
    code = await run(args, out=out, err=err)
    return code, out.getvalue() + err.getvalue()


async def test_each_round_writes_what_the_new_size_adds(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=signer)
    out = tmp_path / "static"
    publisher = Publisher(log, out)
    sizes = [0, 1, 255, 256, 300, 65536 + 300]
    first_full: dict[str, int] = {}
    for size in sizes:
        have = (await log.head(0)).size  # type: ignore[union-attr]
        await log.append_many([b"e%d" % i for i in range(have, size)])
        assert await publisher.publish()
        assert not await publisher.publish()  # nothing new: nothing written
        got = files(out)
        want = {t.path() for t in tiles_for_size(size, entries=True)}
        assert want <= set(got), f"size {size}: missing {sorted(want - set(got))[:3]}"
        extra = set(got) - want - {"checkpoint"}
        assert all(".p/" in p for p in extra)  # only partial tiles of earlier sizes stay
        assert f"\n{size}\n".encode() in got["checkpoint"]
        # Full tiles are written once: never replaced (same inode) by later rounds.
        for t in tiles_for_size(size, entries=True):
            if t.is_full:
                first_full.setdefault(t.path(), (out / t.path()).stat().st_ino)
                assert (out / t.path()).stat().st_ino == first_full[t.path()]
    assert not [p for p in out.rglob(".*.tmp")]  # no temporary files left behind
    # The same bytes as a full export of the final size.
    full = tmp_path / "export"
    await export_log(log, full)
    mine = files(out)
    assert all(mine[k] == v for k, v in files(full).items())
    # A publisher restarted on the directory goes on from its checkpoint.
    await log.append_many([b"late%d" % i for i in range(10)])
    again = Publisher(log, out)
    assert await again.publish() and again.size == sizes[-1] + 10
    await log.close()


async def test_one_entry_per_round_costs_a_bounded_number_of_bytes_per_entry(
        tmp_path: Path) -> None:
    """A lightly used log (one entry per round): what the directory holds grows with the
    entries, not with the rounds; the partial tiles of the published size stay."""
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    out = tmp_path / "static"
    publisher = Publisher(log, out, partial_grace=0)
    rounds = 600
    for i in range(rounds):
        await log.append(b"entry %04d" % i)  # 10 bytes
        assert await publisher.publish()
        size = i + 1
        got = files(out)
        missing = {t.path() for t in tiles_for_size(size, entries=True)} - set(got)
        assert not missing, f"size {size}: the right edge is not served: {sorted(missing)}"
    got = files(out)
    per_entry = sum(len(v) for v in got.values()) / rounds
    assert per_entry < 100, per_entry  # 32 bytes of hash + 12 of bundle, and the edge
    assert len(got) / rounds < 0.05, sorted(got)
    for partials in out.rglob("*.p"):  # no grace: only the published width of each tile
        assert len(list(partials.iterdir())) == 1, sorted(partials.iterdir())
    await log.close()


async def test_a_superseded_partial_tile_stays_for_the_grace_period(tmp_path: Path) -> None:
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    out = tmp_path / "static"
    publisher = Publisher(log, out)  # the default grace: minutes
    await log.append_many([b"a", b"b"])
    await publisher.publish()
    await log.append(b"c")
    await publisher.publish()
    # A client that read the size-2 checkpoint just before can still fetch its tiles.
    assert (out / "tile/0/000.p/2").exists() and (out / "tile/0/000.p/3").exists()
    await log.append_many([b"%d" % i for i in range(253)])  # 256: the full tile is out
    await publisher.publish()
    assert (out / "tile/0/000").exists() and not (out / "tile/0/000.p").exists()
    assert not (out / "tile/entries/000.p").exists()
    await log.close()


async def test_a_restart_removes_what_a_crash_left_mid_round(tmp_path: Path) -> None:
    log = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    out = tmp_path / "static"
    await log.append_many([b"a", b"b"])
    await Publisher(log, out).publish()
    # A round killed between writing its temporary files and renaming them.
    left = [out / "tile/0/000.p/.3.k2x9.tmp", out / "tile/entries/000.p/.3.q1w2.tmp",
            out / ".checkpoint.z8y7.tmp"]
    for path in left:
        path.write_bytes(b"half")
    await log.append(b"c")
    restarted = Publisher(log, out)
    assert await restarted.publish()
    assert not list(out.rglob("*.tmp")), list(out.rglob("*.tmp"))
    await log.close()


async def test_refuses_a_directory_of_another_log(tmp_path: Path) -> None:
    one = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    other = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    out = tmp_path / "static"
    await one.append(b"a")
    await Publisher(one, out).publish()
    with pytest.raises(ExportError, match="not a checkpoint of this log"):
        await Publisher(other, out).publish()


async def test_ledger_serve_publish_feeds_a_static_mirror_the_monitor_audits(
        tmp_path: Path) -> None:
    logdir, out = tmp_path / "log", tmp_path / "static"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    ledger = [sys.executable, "-m", "ledger.cli.main"]
    subprocess.run([*ledger, "init", str(logdir), "--origin", ORIGIN], check=True,
                   capture_output=True, env=env)
    vkey = (logdir / "log.vkey").read_text().strip()
    proc = subprocess.Popen([*ledger, "serve", str(logdir), "--listen", "127.0.0.1:0",
                             "--publish", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b"http://127.0.0.1:")
        async for url in static_server(out):
            assert (await monitor(url, vkey, tmp_path))[0] == ExitCode.OK
            total = 0
            for batch in (300, 1, 700):
                subprocess.run([*ledger, "add", str(logdir)], input=b"x\n" * batch, check=True,
                               capture_output=True, env=env)
                total += batch
                deadline = time.monotonic() + 30  # generous: not a timing assertion
                while b"\n%d\n" % total not in (out / "checkpoint").read_bytes():
                    assert time.monotonic() < deadline, "the mirror did not follow the log"
                    await asyncio.sleep(0.1)
                code, text = await monitor(url, vkey, tmp_path)
                assert code == ExitCode.OK, text
                assert f"size {total}" in text or str(total) in text, text
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()



async def test_notary_publish_lets_the_verifier_check_consistency_off_the_database(
        tmp_path: Path) -> None:
    """``notary serve --publish``: level 5 against the static mirror, which has no proof API,
    is proven from its tiles."""
    out = tmp_path / "static"
    async with live_notary(tmp_path, publish=str(out)) as notary:
        first = await notary.notarize(x=0)
        for i in range(1, 40):
            await notary.notarize(x=i)
        deadline = time.monotonic() + 30  # generous: not a timing assertion
        while not (out / "checkpoint").exists() or \
                b"\n40\n" not in (out / "checkpoint").read_bytes():
            assert time.monotonic() < deadline, "the mirror did not follow the log"
            await asyncio.sleep(0.1)
        async for url in static_server(out):
            report = await verify(saved(first), notary.trust(), log_url=url)
            assert statuses(report)["consistency"] == "passed", report.verdict.levels
            assert "size 40" in report.verdict.levels["consistency"].reason


def test_notary_serve_publish_leaves_no_temporary_file_after_a_crash(tmp_path: Path) -> None:
    """SIGKILL mid-round leaves ``.tmp`` files in the served tree; the next start removes
    them before it publishes again."""
    out = tmp_path / "static"
    server = NotaryProcess(tmp_path / "data", args=("--publish", str(out)))
    with server:
        key = server.create_api_key("p")
        body = {"server": "s", "tool": "t", "call_sha256": "ab" * 32}
        assert server.post("/v1/tool-calls", json_body=body, api_key=key).status == 201
        deadline = time.monotonic() + 30
        while b"\n1\n" not in ((out / "checkpoint").read_bytes()
                               if (out / "checkpoint").exists() else b""):
            assert time.monotonic() < deadline, "nothing was published"
            time.sleep(0.1)
        server.kill9()
        left = [out / "tile/0/000.p/.2.k2x9.tmp", out / ".checkpoint.z8y7.tmp"]
        for path in left:
            path.write_bytes(b"half")
        server.start()
        deadline = time.monotonic() + 30
        while any(p.exists() for p in left):
            assert time.monotonic() < deadline, [p for p in left if p.exists()]
            time.sleep(0.1)
        # The new process's own rounds write through temporary files too (its first rewrites
        # the checkpoint: a new ML-DSA-44 line); none stays once a round is over.
        while list(out.rglob("*.tmp")):
            assert time.monotonic() < deadline, list(out.rglob("*.tmp"))
            time.sleep(0.05)
