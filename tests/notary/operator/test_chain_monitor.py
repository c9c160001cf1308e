"""``notary monitor`` follows a notary's chain of logs (issue 33): a real ``notary serve``,
rolled twice with ``notary log roll`` while serving, audited from log 0's key alone; a forged
list of logs, or a next log signed by another key, raises an alarm."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from ledger.cli.monitor import run
from ledger.core.checkpoint import open_checkpoint, sign_checkpoint
from ledger.core.note import Ed25519Signer, Ed25519Verifier
from ledger.monitor.state import load_state
from ledger.process.exitcodes import ExitCode
from notary.cli.main import build_parser
from notary.core.records import CallRecord, new_salt
from tests.notary_server import NotaryProcess
from tests.servers import Served, start_server

Rewrite = Callable[[str, bytes], bytes]


def notarize(server: NotaryProcess, key: str, n: int) -> dict[str, Any]:
    rec = CallRecord(server="srv", tool="echo", arguments={"n": n},
                     result={"content": [{"type": "text", "text": str(n)}]}, salt=new_salt())
    resp = server.post("/v1/tool-calls", api_key=key, json_body={
        "server": rec.server, "tool": rec.tool, "call_sha256": rec.call_sha256()})
    assert resp.status == 201, resp.body
    got: dict[str, Any] = json.loads(resp.body)
    return got


def roll(server: NotaryProcess) -> None:
    server.cli("log", "roll", "--data", str(server.data_dir))


@pytest.fixture(scope="module")
def rolled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NotaryProcess]:
    """A notary with three logs: 2 receipts in log 0, 1 in log 1, 2 in the active log 2."""
    with NotaryProcess(tmp_path_factory.mktemp("chain") / "data") as server:
        key = server.create_api_key()
        origins = []
        for n, count in enumerate((2, 1, 2)):
            if n:
                roll(server)
            receipts = [notarize(server, key, 10 * n + i) for i in range(count)]
            origins.append(receipts[0]["ledger"]["origin"])
        assert len(set(origins)) == 3, origins  # each batch landed in a new log
        yield server


def vkey0(server: NotaryProcess) -> str:
    return (server.data_dir / "log.vkey").read_text().strip()


async def monitor(url: str, vkey: str, state: Path, evidence: Path, *extra: str
                  ) -> tuple[int, str, str]:
    args = build_parser().parse_args(["monitor", "--log", url, "--vkey", vkey, "--audit",
                                      "--state", str(state), "--evidence-dir", str(evidence),
                                      *extra])
    out, err = io.StringIO(), io.StringIO()
    code = await run(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


async def test_the_monitor_follows_the_chain_from_the_first_key(
        rolled: NotaryProcess, tmp_path: Path) -> None:
    ledger = json.loads(rolled.get("/v1/ledger").body)
    logs = ledger["logs"]
    assert [g["state"] for g in logs] == ["frozen", "frozen", "active"]
    state = tmp_path / "state" / "log0.json"
    code, out, err = await monitor(rolled.url, vkey0(rolled), state, tmp_path / "ev")
    assert code == ExitCode.OK, err
    # One line per log, each audited: 2 receipts + the successor record, 1 + 1, 2.
    assert out.splitlines() == [
        f"ok: {g['origin']} size {size} (first seen); audited {size} entries in "
        + line.split(" entries in ")[1]
        for g, size, line in zip(logs, (3, 2, 2), out.splitlines(), strict=True)]
    # A state file per log: the pinned one where --state says, the others beside it, each
    # holding its log's checkpoint verified under the key the successor record named.
    files = sorted((tmp_path / "state").iterdir())
    assert len(files) == 3
    states = [load_state(f) for f in files]
    for g in logs:
        [saved] = [s for s in states if s is not None and s.origin == g["origin"]]
        assert saved.vkey == g["vkeys"][0] and saved.checkpoint is not None
        open_checkpoint(saved.checkpoint, Ed25519Verifier.from_vkey(g["vkeys"][0]))
    code, out, err = await monitor(rolled.url, vkey0(rolled), state, tmp_path / "ev")
    assert code == ExitCode.OK, err
    assert [line.split(" (")[1].split(")")[0] for line in out.splitlines()] == ["unchanged"] * 3
    assert not (tmp_path / "ev").exists()


async def proxy(target: str, rewrite: Rewrite) -> Served:
    """Forwards to ``target``; ``rewrite(path, body)`` may change an answer, and the list of
    logs names the proxy's URLs instead of the notary's."""
    session = aiohttp.ClientSession()
    served: list[Served] = []

    async def forward(request: web.Request) -> web.Response:
        async with session.get(target + request.path_qs) as r:
            body, status = await r.read(), r.status
        if request.path == "/v1/ledger" and status == 200:
            body = body.replace(target.encode(), served[0].url.encode())
        return web.Response(status=status, body=rewrite(request.path, body))

    app = web.Application()
    app.router.add_get("/{tail:.*}", forward)

    async def close(_app: web.Application) -> None:
        await session.close()

    app.on_cleanup.append(close)
    served.append(await start_server(app))
    return served[0]


def forged_list(change: Callable[[list[dict[str, Any]]], None]) -> Rewrite:
    def rewrite(path: str, body: bytes) -> bytes:
        if path != "/v1/ledger":
            return body
        doc = json.loads(body)
        change(doc["logs"])
        return json.dumps(doc).encode()
    return rewrite


def other_key(origin: str) -> Ed25519Signer:
    return Ed25519Signer.generate(origin)


def with_other_keys(logs: list[dict[str, Any]]) -> None:
    logs[1]["vkeys"] = [other_key(logs[1]["origin"]).verifier_key_text()]


def with_other_origin(logs: list[dict[str, Any]]) -> None:
    logs[2]["origin"] += "-x"


def without_the_last(logs: list[dict[str, Any]]) -> None:
    del logs[2]
    logs[1]["state"] = "active"


def with_log_1_active(logs: list[dict[str, Any]]) -> None:
    logs[1]["state"] = "active"


def with_a_forged_next_log(rolled: NotaryProcess) -> Rewrite:
    """An honest list, but log 1 served with a checkpoint signed by a key nobody named."""
    def rewrite(path: str, body: bytes) -> bytes:
        if path != "/logs/1/checkpoint":
            return body
        cp, _ = open_checkpoint(body, _key_of(rolled, 1))
        return sign_checkpoint(cp, other_key(cp.origin))
    return rewrite


def _key_of(server: NotaryProcess, n: int) -> Ed25519Verifier:
    logs = json.loads(server.get("/v1/ledger").body)["logs"]
    return Ed25519Verifier.from_vkey(logs[n]["vkeys"][0])


@pytest.mark.parametrize(("forgery", "kind", "says"), [
    ("keys", "log_chain", "hands over to"),
    ("origin", "log_chain", "hands over to"),
    ("hidden", "log_chain", "its last entry is a successor record"),
    ("unfrozen", "log_chain", "every log but the last is frozen"),
    ("signer", "bad_signature", "log signature"),
])
async def test_a_forged_chain_raises_an_alarm(rolled: NotaryProcess, tmp_path: Path,
                                             forgery: str, kind: str, says: str) -> None:
    rewrites: dict[str, Callable[[], Rewrite]] = {
        "keys": lambda: forged_list(with_other_keys),
        "origin": lambda: forged_list(with_other_origin),
        "hidden": lambda: forged_list(without_the_last),
        "unfrozen": lambda: forged_list(with_log_1_active),
        "signer": lambda: with_a_forged_next_log(rolled),
    }
    served = await proxy(rolled.url, rewrites[forgery]())
    try:
        code, _, err = await monitor(served.url, vkey0(rolled), tmp_path / "s.json",
                                     tmp_path / "ev")
    finally:
        await served.stop()
    assert code == ExitCode.CHECK_FAILED, err
    assert f"ALARM {kind}" in err and says in err, err
    [evidence] = list((tmp_path / "ev").iterdir())
    doc = json.loads(evidence.read_text())
    assert doc["kind"] == kind
    if kind == "log_chain" and forgery != "unfrozen":
        # Enough for a third party: the frozen log's final checkpoint and its last entry.
        assert doc["final_checkpoint"] and doc["last_entry"]
