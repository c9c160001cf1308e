"""Every server on both event loops: each started as a real process on loopback with
``LEDGER_EVENT_LOOP`` forced to uvloop, then to asyncio. Each must say in its start-up line which
loop it runs on, answer a real request (a notarization and its verification in the worker
processes, a checkpoint read, a cosignature, a mirror push, MCP calls through the gateway and
``notary mcp``) and stop cleanly on SIGTERM. The commands that prepare them (``ledger init``,
``ledger add``, ``notary apikey create``) run on the same loop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from mcp import Client

from ledger.client.http import HttpClient
from ledger.client.mirror import LogReaderSource, MirrorClient
from ledger.client.witness import WitnessClient
from ledger.core.checkpoint import open_checkpoint
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, Ed25519Verifier, open_note
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.cosigner.cosigner import origin_hash
from ledger.log.facade import Log
from ledger.process.event_loop import ASYNCIO, ENV_VAR, UVLOOP
from ledger.storage.memory import MemoryStore
from notary.core.meta import TOOL_CALL_META_KEY
from notary.core.records import CallRecord, new_salt
from tests.notary_server import NotaryProcess, app_notary, free_port

REPO = Path(__file__).resolve().parents[3]
ORIGIN = "example.test/loops"
GATEWAY_POLICY = """\
version = 1

[gateway]
name = "loop-gateway"

[tools.echo]
"""

pytestmark = pytest.mark.parametrize("loop", [UVLOOP, ASYNCIO])


@dataclass
class Child:
    """A command running in a process of its own, its stdout and stderr in files."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    async def wait_for(self, pattern: str, path: Path, timeout: float = 60.0) -> re.Match[str]:
        """The first match of ``pattern`` in stdout or stderr (``path``), once it is there."""
        for _ in range(int(timeout / 0.05)):
            found = re.search(pattern, path.read_text(errors="replace"))
            if found is not None:
                return found
            if self.proc.poll() is not None:
                pytest.fail(f"exited with {self.proc.returncode}:\n{self.stderr()[-4000:]}")
            await asyncio.sleep(0.05)
        pytest.fail(f"no {pattern!r} within {timeout} s:\n{self.stderr()[-4000:]}")

    async def terminate(self) -> int:
        """SIGTERM; the exit status (it must come within 30 s)."""
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, 30)


@contextlib.asynccontextmanager
async def spawn(tmp: Path, name: str, loop: str, *argv: str) -> AsyncIterator[Child]:
    """``python -m ARGV`` on ``loop``; killed on the way out if still running."""
    env = {**os.environ, "PYTHONPATH": str(REPO), ENV_VAR: loop}
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", *argv], stdin=subprocess.DEVNULL,
                                stdout=o, stderr=e, env=env, cwd=tmp)
    try:
        yield Child(proc, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def run_on(loop: str, *argv: str, stdin: bytes = b"") -> str:
    """``python -m ARGV`` on ``loop`` to completion; its stdout (it must exit 0)."""
    done = subprocess.run([sys.executable, "-m", *argv], input=stdin, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), ENV_VAR: loop},
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def listening_loops(stderr: str) -> list[str]:
    """The ``loop`` of every ``listening`` line of a JSON log (one per serving process)."""
    records = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [r["loop"] for r in records if r.get("event") == "listening"]


def assert_stopped_cleanly(status: int, stderr: str) -> None:
    assert status == 0, stderr[-4000:]
    assert "Traceback" not in stderr and "event_loop_error" not in stderr, stderr[-4000:]


async def memory_log(entries: Sequence[bytes]) -> tuple[Log, Ed25519Signer, bytes]:
    """A log in memory holding ``entries``, its key and its checkpoint note."""
    signer = Ed25519Signer.generate(ORIGIN)
    log = await Log.open(MemoryStore(), signer=signer)
    await log.append_many(list(entries))
    head = await log.head(0)
    assert head is not None
    return log, signer, head.note


def write_key(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def test_notary_serve_and_its_workers(tmp_path: Path, loop: str) -> None:
    server = NotaryProcess(tmp_path / "notary-data", args=("--workers", "2"),
                           env={ENV_VAR: loop}, split_stderr=True)
    try:
        server.start()
        key = server.create_api_key("loops")
        record = CallRecord(server="srv", tool="t", arguments={"loop": loop},
                            result={"content": [{"type": "text", "text": "ok"}]},
                            salt=new_salt())
        answer = server.post("/v1/tool-calls", api_key=key, json_body={
            "server": "srv", "tool": "t", "call_sha256": record.call_sha256()})
        assert answer.status == 201, answer.text
        # Verifying runs in the pool's worker processes, started from the server's loop.
        verdict = server.post("/v1/tool-calls/verify",
                              json_body={"id": answer.json()["id"], "record": record.to_json()})
        assert verdict.status == 200 and verdict.json()["valid"] is True, verdict.text
    finally:
        status = server.stop()
    stderr = server.stderr_bytes().decode()
    assert listening_loops(stderr) == [loop, loop]  # one line from each worker
    assert_stopped_cleanly(status or 0, stderr)


async def test_ledger_serve(tmp_path: Path, loop: str) -> None:
    logdir = tmp_path / "log"
    run_on(loop, "ledger.cli.main", "init", str(logdir), "--origin", ORIGIN)
    run_on(loop, "ledger.cli.main", "add", str(logdir), stdin=b"one\ntwo\nthree\n")
    vkey = Ed25519Verifier.from_vkey((logdir / "log.vkey").read_text().strip())
    async with spawn(tmp_path, "ledger", loop, "ledger.cli.main", "serve", str(logdir),
                     "--listen", "127.0.0.1:0") as child:
        url = (await child.wait_for(r"http://127\.0\.0\.1:\d+", child.out)).group(0)
        async with aiohttp.ClientSession() as http, http.get(url + "/checkpoint") as r:
            assert r.status == 200
            checkpoint, _ = open_checkpoint(await r.read(), vkey)
        assert checkpoint.size == 3
        status = await child.terminate()
    assert listening_loops(child.stderr()) == [loop]
    assert_stopped_cleanly(status, child.stderr())


async def test_witness_serve(tmp_path: Path, loop: str) -> None:
    witness = CosignatureSigner.generate("witness.test/loops")
    key = write_key(tmp_path / "witness.key", witness.private_key_text())
    log, log_key, note = await memory_log([b"a", b"b"])
    async with spawn(tmp_path, "witness", loop, "ledger.cli.main", "witness", "serve",
                     "--key", str(key), "--log", f"{ORIGIN}={log_key.verifier_key_text()}",
                     "--listen", "127.0.0.1:0", "--data", str(tmp_path / "witness"),
                     "--log-format", "json") as child:
        url = (await child.wait_for(r"http://127\.0\.0\.1:\d+", child.out)).group(0)
        async with aiohttp.ClientSession() as http:
            client = WitnessClient(url, witness.verifier(), HttpClient(http))
            assert await client.add_checkpoint(0, [], note)  # verified by the client
        status = await child.terminate()
    await log.close()
    assert listening_loops(child.stderr()) == [loop]
    assert_stopped_cleanly(status, child.stderr())


async def test_mirror_serve(tmp_path: Path, loop: str) -> None:
    mirror = SubtreeCosignatureSigner.generate("mirror.test/loops")
    key = write_key(tmp_path / "mirror.key", mirror.private_key_text())
    log, log_key, note = await memory_log([b"entry %d" % i for i in range(300)])
    async with spawn(tmp_path, "mirror", loop, "ledger.cli.main", "mirror", "serve",
                     "--key", str(key), "--log", f"{ORIGIN}={log_key.verifier_key_text()}",
                     "--listen", "127.0.0.1:0", "--data", str(tmp_path / "mirror"),
                     "--log-format", "json") as child:
        url = (await child.wait_for(r"http://127\.0\.0\.1:\d+", child.out)).group(0)
        async with aiohttp.ClientSession() as http:
            client = MirrorClient(url, [mirror.verifier()], HttpClient(http))
            assert await client.push(note, LogReaderSource(log.reader))
            async with http.get(f"{url}/{origin_hash(ORIGIN)}/checkpoint") as r:
                assert r.status == 200
                served = await r.read()
        open_note(served, [mirror.verifier()])
        open_note(served, [log_key.verifier()])
        status = await child.terminate()
    await log.close()
    assert listening_loops(child.stderr()) == [loop]
    assert_stopped_cleanly(status, child.stderr())


async def test_gateway_over_http(tmp_path: Path, loop: str) -> None:
    """Its stdio upstream is a subprocess of the gateway's loop; uvicorn ends the process with
    the signal it drained on, as ``uvicorn.run`` did."""
    (tmp_path / "policy.toml").write_text(GATEWAY_POLICY)
    port = free_port()
    upstream = f"{sys.executable} -m tests.gateway_upstream --log {tmp_path / 'calls.jsonl'}"
    async with app_notary(tmp_path / "notary-data") as notary:
        write_key(tmp_path / "api.key", await notary.new_api_key("gateway"))
        async with spawn(
                tmp_path, "gateway", loop, "notary.cli.main", "gateway", "--upstream", upstream,
                "--upstream-cwd", str(REPO), "--policy", str(tmp_path / "policy.toml"),
                "--state", str(tmp_path / "gateway.db"), "--notary", notary.url,
                "--api-key-file", str(tmp_path / "api.key"), "--log-format", "json",
                "--http", f"127.0.0.1:{port}") as child:
            banner = await child.wait_for(r"serving MCP at (\S+) \(event loop: (\w+)\)",
                                          child.err)
            assert banner.groups() == (f"http://127.0.0.1:{port}/mcp", loop)
            await accepting(port, child)
            async with Client(banner.group(1)) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
                result = await client.call_tool("echo", {"text": loop})
                assert not result.is_error
                assert TOOL_CALL_META_KEY in (result.meta or {})  # notarized on the way
            status = await child.terminate()
    assert status == -signal.SIGTERM
    assert "Traceback" not in child.stderr(), child.stderr()


async def test_notary_mcp_over_http(tmp_path: Path, loop: str) -> None:
    port = free_port()
    async with spawn(tmp_path, "mcp", loop, "notary.cli.main", "mcp", "--offline",
                     "--http", f"127.0.0.1:{port}") as child:
        banner = await child.wait_for(r"at (\S+) \(event loop: (\w+)\)", child.err)
        assert banner.groups() == (f"http://127.0.0.1:{port}/mcp", loop)
        await accepting(port, child)
        async with Client(banner.group(1)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
        assert "verify_tool_call" in tools
        status = await child.terminate()
    assert status == -signal.SIGTERM
    assert "Traceback" not in child.stderr(), child.stderr()


async def accepting(port: int, child: Child) -> None:
    """Once 127.0.0.1:``port`` accepts connections (uvicorn announces before it binds)."""
    for _ in range(600):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            assert child.proc.poll() is None, child.stderr()
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    pytest.fail(f"nothing accepts connections on port {port}:\n{child.stderr()}")
