"""The monitor against real logs served on loopback, honest and misbehaving.

The logs are the ``watched`` fixture's (tests/watched_logs.py): an honest log and a fork of it,
behind a small proxy that lets a test switch the monitor to the forked history, replay an old
checkpoint, or tamper with one tile or bundle on its way out.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from ledger.cli.monitor import register, run
from ledger.core.checkpoint import Checkpoint, sign_checkpoint
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, merge_signatures, parse_note
from ledger.http.routes import create_ledger_app
from ledger.log.facade import Log
from ledger.monitor.state import load_state
from ledger.process.exitcodes import ExitCode
from ledger.storage.memory import MemoryStore
from tests.servers import Serve
from tests.watched_logs import ORIGIN, WatchedLogs, entry, grow, head_note, monitor

EXIT_OK, EXIT_ALARM, EXIT_FETCH = ExitCode.OK, ExitCode.CHECK_FAILED, ExitCode.UNREACHABLE

REPO = Path(__file__).resolve().parents[3]


async def test_growth_is_verified_audited_and_remembered(watched: WatchedLogs) -> None:
    code, out, err = await monitor(*watched.args("--audit"))
    assert code == EXIT_OK, err
    assert "size 300 (first seen); audited 300 entries" in out
    await grow(watched.honest, [entry() for _ in range(333)])
    code, out, err = await monitor(*watched.args("--audit"))
    assert code == EXIT_OK, err
    assert "size 633 (consistent with 300); audited 333 entries" in out
    state = load_state(watched.tmp / "state.json")
    assert state is not None and state.audit is not None and state.audit.size == 633
    assert parse_note(state.checkpoint or b"").text.split("\n")[1] == "633"
    # Nothing new: nothing to audit.
    code, out, _ = await monitor(*watched.args("--audit"))
    assert code == EXIT_OK and "audited 0 entries" in out


async def test_consistency_without_audit_uses_tiles_when_no_proof_api(watched: WatchedLogs) -> None:
    assert (await monitor(*watched.args()))[0] == EXIT_OK
    await grow(watched.honest, [entry() for _ in range(70)])
    watched.proxy.override["v1/ledger/proofs/consistency"] = b"{}"  # a useless proof API
    code, out, err = await monitor(*watched.args())
    assert code == EXIT_OK, err
    assert "consistent with 300" in out


async def test_forked_log_is_detected(watched: WatchedLogs) -> None:
    assert (await monitor(*watched.args()))[0] == EXIT_OK  # verified the honest size 300
    watched.proxy.target = watched.fork_url  # same key, other history, same size
    code, _, err = await monitor(*watched.args())
    assert code == EXIT_ALARM and "ALARM fork" in err
    await grow(watched.fork, [entry("evil") for _ in range(50)])
    code, _, err = await monitor(*watched.args())
    assert code == EXIT_ALARM and "ALARM inconsistent" in err
    kinds = {e["kind"]: e for e in watched.evidence()}
    assert set(kinds) == {"fork", "inconsistent"}
    ev = kinds["inconsistent"]
    assert ev["old_checkpoint"] == (await head_note(watched.honest)).decode()
    assert ev["new_checkpoint"] == (await head_note(watched.fork)).decode()
    assert ev["proof"]["old"] == 300 and ev["proof"]["new"] == 350  # type: ignore[index]
    # The state did not move to the fork: back on the honest log all is well.
    watched.proxy.target = watched.honest_url
    assert (await monitor(*watched.args()))[0] == EXIT_OK


async def test_rollback_and_bad_signatures_are_detected(watched: WatchedLogs) -> None:
    old = await head_note(watched.honest)
    await grow(watched.honest, [entry() for _ in range(10)])
    assert (await monitor(*watched.args()))[0] == EXIT_OK
    watched.proxy.override["checkpoint"] = old
    code, _, err = await monitor(*watched.args())
    assert code == EXIT_ALARM and "ALARM rollback" in err
    impostor = Ed25519Signer.generate(ORIGIN)
    watched.proxy.override["checkpoint"] = sign_checkpoint(
        Checkpoint(ORIGIN, 400, b"\x01" * 32), impostor)
    code, _, err = await monitor(*watched.args())
    assert code == EXIT_ALARM and "ALARM bad_signature" in err
    watched.proxy.override["checkpoint"] = b"not a checkpoint"
    code, _, err = await monitor(*watched.args())
    assert code == EXIT_ALARM and "ALARM bad_checkpoint" in err
    assert {e["kind"] for e in watched.evidence()} == {"rollback", "bad_signature",
                                                       "bad_checkpoint"}


async def test_witness_quorum(watched: WatchedLogs) -> None:
    w1, w2 = CosignatureSigner.generate("w1.test"), CosignatureSigner.generate("w2.test")
    args = watched.args("--witness", w1.verifier_key_text(), "--witness",
                       w2.verifier_key_text(), "--quorum", "1")
    code, _, err = await monitor(*args)
    assert code == EXIT_ALARM and "ALARM witness_quorum" in err
    note = await head_note(watched.honest)
    text = parse_note(note).text
    watched.proxy.override["checkpoint"] = merge_signatures(note, [w2.cosign(text, 1_700_000_000)])
    code, _, err = await monitor(*args)
    assert code == EXIT_OK, err
    # A cosignature line by a configured witness that does not verify is a bad signature.
    bad = w1.cosign(text, 1_700_000_000)
    forged = type(bad)(bad.name, bad.key_id, bad.signature[:-1] + bytes([bad.signature[-1] ^ 1]))
    watched.proxy.override["checkpoint"] = merge_signatures(note, [forged])
    code, _, err = await monitor(*args)
    assert code == EXIT_ALARM and "ALARM bad_signature" in err


async def test_tlog_policy(watched: WatchedLogs) -> None:
    ws = [CosignatureSigner.generate(f"p{i}.test") for i in range(3)]
    policy = watched.tmp / "policy.txt"
    policy.write_text(f"log {watched.signer.verifier_key_text()}\n"
                      + "".join(f"witness W{i} {w.verifier_key_text()}\n"
                                for i, w in enumerate(ws))
                      + "group two 2 W0 W1 W2\nquorum two\n")
    note = await head_note(watched.honest)
    text = parse_note(note).text
    watched.proxy.override["checkpoint"] = merge_signatures(note, [ws[2].cosign(text, 1)])
    code, _, err = await monitor(*watched.args("--policy", str(policy)))
    assert code == EXIT_ALARM and "ALARM witness_quorum" in err
    watched.proxy.override["checkpoint"] = merge_signatures(
        note, [ws[2].cosign(text, 1), ws[0].cosign(text, 2)])
    code, _, err = await monitor(*watched.args("--policy", str(policy)))
    assert code == EXIT_OK, err
    # The same flag name as notary verify / mcp / serve / gateway audit.
    code, _, err = await monitor(*watched.args("--witness-policy", str(policy)))
    assert code == EXIT_OK, err


@pytest.mark.parametrize("what", ["tile", "bundle", "edge"])
async def test_audit_catches_tampering(watched: WatchedLogs, what: str) -> None:
    def flip(offset: int) -> Callable[[bytes], bytes]:
        return lambda body: body[:offset] + bytes([body[offset] ^ 1]) + body[offset + 1:]

    if what == "tile":
        watched.proxy.tamper["tile/0/000"] = flip(32 * 17)
    elif what == "bundle":
        watched.proxy.tamper["tile/entries/000"] = flip(40)  # inside the first entry
    else:
        watched.proxy.tamper["tile/0/001.p/44"] = flip(5)
    code, _, err = await monitor(*watched.args("--audit"))
    assert code == EXIT_ALARM, err
    (ev,) = watched.evidence()
    assert ev["kind"] == "tile_mismatch"
    assert ev["tile"]["path"] == {  # type: ignore[index]
        "tile": "tile/0/000", "bundle": "tile/0/000", "edge": "tile/0/001.p/44"}[what]
    # Nothing was recorded as audited; once the log serves the right bytes the audit passes.
    state = load_state(watched.tmp / "state.json")
    assert state is not None and state.audit is None and state.progress is None
    watched.proxy.tamper.clear()
    assert (await monitor(*watched.args("--audit")))[0] == EXIT_OK


async def test_audit_catches_entries_that_do_not_give_the_root(watched: WatchedLogs, serve: Serve
                                                               ) -> None:
    """Bundle and tile rewritten together: the tiles agree, only the root can tell."""
    fake = [entry() for _ in range(300)]
    liar = await Log.open(MemoryStore(), signer=Ed25519Signer.generate(ORIGIN))
    await grow(liar, fake)
    liar_url = (await serve(create_ledger_app(liar))).url
    async with aiohttp.ClientSession() as http:
        for path in ("tile/entries/000", "tile/entries/001.p/44", "tile/0/000",
                     "tile/0/001.p/44", "tile/1/000.p/1"):
            async with http.get(f"{liar_url}/{path}") as r:
                watched.proxy.override[path] = await r.read()
    code, _, err = await monitor(*watched.args("--audit"))
    assert code == EXIT_ALARM and "ALARM root_mismatch" in err


async def test_watched_servers_are_reported(watched: WatchedLogs) -> None:
    await grow(watched.honest, [entry("alpha", "t1"), entry("beta"), entry("alpha", "t2")])
    code, out, err = await monitor(*watched.args("--watch-server", "alpha"))
    assert code == EXIT_OK, err
    items = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(i["server"], i["tool"]) for i in items] == [("alpha", "t1"), ("alpha", "t2")]
    assert [i["index"] for i in items] == [300, 302]
    code, out, _ = await monitor(*watched.args("--watch-server", "alpha"))
    assert code == EXIT_OK and "watched_entry" not in out  # reported once


async def test_unreachable_log_is_not_an_alarm(watched: WatchedLogs) -> None:
    args = watched.args()
    args[args.index("--log") + 1] = "http://127.0.0.1:9"
    code, _, err = await monitor(*args)
    assert code == EXIT_FETCH and "cannot read the log" in err
    assert watched.evidence() == []


async def test_daemon_keeps_alarming_and_exposes_metrics(watched: WatchedLogs) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stop = asyncio.Event()
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(watched.args("--audit", "--interval", "0.05",
                                         "--metrics", f"127.0.0.1:{port}"))
    err = io.StringIO()
    task = asyncio.create_task(run(args, out=io.StringIO(), err=err, stop=stop))

    async def metrics() -> dict[str, float]:
        async with aiohttp.ClientSession() as http, \
                http.get(f"http://127.0.0.1:{port}/metrics") as r:
            text = await r.text()
        return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
                if line and not line.startswith("#")}

    async def until(pred: Callable[[dict[str, float]], bool]) -> dict[str, float]:
        for _ in range(200):
            try:
                m = await metrics()
                if pred(m):
                    return m
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
        raise AssertionError(err.getvalue())

    # The verified size is set before the audit of that checkpoint ends: wait for both.
    m = await until(lambda m: m.get("notary_monitor_verified_size") == 300
                    and m.get("notary_monitor_audited_size") == 300)
    assert m["notary_monitor_entries_audited_total"] == 300
    watched.proxy.target = watched.fork_url
    await until(lambda m: m.get('notary_monitor_alarms_total{kind="fork"}', 0) >= 2)
    assert (await metrics())["notary_monitor_alarm_active"] == 1
    watched.proxy.target = watched.honest_url
    await grow(watched.honest, [entry() for _ in range(5)])
    await until(lambda m: m.get("notary_monitor_audited_size") == 305)
    stop.set()
    assert await asyncio.wait_for(task, 5) == EXIT_OK


async def test_command_line_exit_status(watched: WatchedLogs) -> None:
    async def cli(*argv: str) -> int:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "notary.cli.main", *argv, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(REPO)))
        return await proc.wait()

    assert await cli(*watched.args("--once")) == EXIT_OK
    watched.proxy.target = watched.fork_url
    assert await cli(*watched.args("--once")) == EXIT_ALARM
    assert await cli("monitor", "--log", watched.url, "--vkey", "nonsense") == 2


# --- pipelined downloads ----------------------------------------------------------------------


class RawServer:
    """A bare HTTP/1.1 server whose framing quirks are chosen per test."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.connections = 0
        self.server: asyncio.base_events.Server | None = None
        self.url = ""

    async def start(self) -> None:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import gzip

        self.connections += 1
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ")[1].decode()
                body = b"body of " + path.encode()
                extra = b""
                close = False
                if path.endswith("/missing"):
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope")
                    answered += 1
                    continue
                if self.mode == "chunked":
                    half = len(body) // 2
                    payload = b"%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\n\r\n" % (
                        half, body[:half], len(body) - half, body[half:])
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + payload)
                    answered += 1
                    continue
                if self.mode == "gzip":
                    body = gzip.compress(body)
                    extra = b"Content-Encoding: gzip\r\n"
                if self.mode == "close-every-2" and answered % 2 == 1:
                    extra, close = b"Connection: close\r\n", True
                if self.mode == "no-length":
                    writer.write(b"HTTP/1.0 200 OK\r\n\r\n" + body)
                    await writer.drain()
                    writer.close()
                    return
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (
                    len(body), extra, body))
                answered += 1
                await writer.drain()
                if close or (self.mode == "drop-after-3" and answered == 3):
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.mark.parametrize("mode", ["chunked", "close-every-2", "no-length", "drop-after-3",
                                  "gzip"])
async def test_pipelined_fetcher_framing(mode: str) -> None:
    from ledger.client.http import HttpClient
    from ledger.client.tiles import LogSource

    server = RawServer(mode)
    await server.start()
    paths = [f"tile/0/{i:03d}" for i in range(9)]
    try:
        async with aiohttp.ClientSession() as http:
            source = LogSource(server.url + "/base", HttpClient(http))
            try:
                from ledger.core.tiles import Tile

                for _ in range(2):  # the second round reuses (or reopens) connections
                    got = await source.tiles([Tile(0, i) for i in range(9)])
                    assert got == [b"body of /base/" + p.encode() for p in paths]
                assert (source._pipeline is None) == (mode == "gzip")  # fell back to aiohttp
                if mode in ("close-every-2", "drop-after-3", "no-length"):
                    assert server.connections > 2  # unanswered requests went on new ones
            finally:
                await source.close()
    finally:
        await server.stop()


async def test_pipelined_fetcher_errors() -> None:
    from ledger.client.http import FetchError
    from ledger.client.pipeline import PipelinedFetcher

    server = RawServer("plain")
    await server.start()
    fetcher = PipelinedFetcher(server.url)
    try:
        assert await fetcher.fetch(["a", "b"], 100) == [b"body of /a", b"body of /b"]
        with pytest.raises(FetchError, match="404"):
            await fetcher.fetch(["a", "missing", "b"], 100)
        with pytest.raises(FetchError, match="larger"):
            await fetcher.fetch(["a"], 5)
        assert await fetcher.fetch(["c"], 100) == [b"body of /c"]  # usable after errors
    finally:
        await fetcher.close()
        await server.stop()
    with pytest.raises(FetchError):
        await PipelinedFetcher("http://127.0.0.1:9").fetch(["a"], 100)


async def test_audit_resumes_from_saved_progress(watched: WatchedLogs,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.client.http import HttpClient
    from ledger.client.tiles import LogSource
    from ledger.core.checkpoint import parse_checkpoint_text
    from ledger.core.compact import TreeState
    from ledger.monitor import audit as audit_module

    monkeypatch.setattr(audit_module, "_SAVE_EVERY", 0.0)
    saved: list[TreeState] = []

    async def save(state: TreeState) -> None:
        saved.append(state)

    cp = parse_checkpoint_text(parse_note(await head_note(watched.honest)).text)
    async with aiohttp.ClientSession() as http:
        source = LogSource(watched.honest_url, HttpClient(http))
        try:
            await audit_module.audit_range(source, TreeState(), cp, save=save, chunk_bundles=1)
            assert [s.size for s in saved] == [256]
            resumed = await audit_module.audit_range(source, saved[0], cp)
            # The strict parser of the pipelined fetcher takes aiohttp's real answers.
            assert source._pipeline is not None and source._pipelined_requests > 0
        finally:
            await source.close()
    assert resumed.entries == 44 and resumed.state.root() == cp.root_hash


async def test_state_defaults_to_a_file_per_log_under_the_state_dir(
        watched: WatchedLogs, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.cli.monitor import default_state_path

    monkeypatch.setenv("XDG_STATE_HOME", str(watched.tmp / "xdg-state"))
    argv = ["monitor", "--log", watched.url, "--vkey", watched.signer.verifier_key_text(),
            "--evidence-dir", str(watched.tmp / "evidence")]
    code, out, err = await monitor(*argv)
    assert code == EXIT_OK and "first seen" in out, (out, err)
    path = default_state_path(ORIGIN, watched.signer.verifier_key_text())
    assert path.is_relative_to(watched.tmp / "xdg-state" / "mcp-notary" / "monitor")
    assert path.exists()
    code, out, _ = await monitor(*argv)  # the second run remembers the first
    assert code == EXIT_OK and "unchanged" in out and "first seen" not in out
    # Another log (another key, same origin) gets another file.
    other = default_state_path(ORIGIN, Ed25519Signer.generate(ORIGIN).verifier_key_text())
    assert other != path and other.parent == path.parent
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(watched.tmp / "home"))
    assert default_state_path(ORIGIN, "k").is_relative_to(
        watched.tmp / "home" / ".local" / "state" / "mcp-notary" / "monitor")
    code, out, err = await monitor(*argv, "--no-state")
    assert code == EXIT_OK and "first seen" in out and "--no-state" in err
    assert not (watched.tmp / "home").exists()


async def test_daemon_prints_one_line_per_poll(watched: WatchedLogs) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(watched.args("--interval", "0.02"))
    err, stop = io.StringIO(), asyncio.Event()
    task = asyncio.create_task(run(args, out=io.StringIO(), err=err, stop=stop))
    for _ in range(500):
        if err.getvalue().count("\n") >= 4:
            break
        await asyncio.sleep(0.02)
    stop.set()
    assert await asyncio.wait_for(task, 5) == EXIT_OK
    lines = err.getvalue().splitlines()
    assert len(lines) >= 4 and all(line.startswith("ok: ") for line in lines), lines
    assert "first seen" in lines[0] and all("unchanged" in line for line in lines[1:])
