"""``notary serve --publish s3://BUCKET/PREFIX`` against a real object store (SeaweedFS on
loopback): the bucket becomes a complete static log that verifiers and monitors read with no
notary running; a SIGKILL and a restart complete it; an outage of the bucket never holds a
receipt, and shows in /healthz and /metrics until the publisher catches up; an object planted
with other bytes is an alarm."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.core.tiles import tiles_for_size
from ledger.process.exitcodes import ExitCode
from tests.node_tools import REPO_ROOT, node_binary
from tests.notary_server import NotaryProcess, capture_cli, live_notary
from tests.seaweed import Seaweed
from tests.verifying import saved, statuses, verify

PREFIX = "notary/a"


def bucket_size(aws: Seaweed, prefix: str = PREFIX) -> int:
    status, _, body = aws.get(f"{prefix}/checkpoint")
    return int(body.split(b"\n")[1]) if status == 200 else -1


def wait_for(what: str, ok: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout  # generous: not a timing assertion
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def issue(server: NotaryProcess, key: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        body = {"server": "s", "tool": "t", "call_sha256": f"{i:064x}"}
        resp = server.post("/v1/tool-calls", json_body=body, api_key=key)
        assert resp.status == 201, resp.text


def metric(server: NotaryProcess, name: str) -> float:
    for line in server.get("/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


async def test_the_bucket_serves_verifiers_and_monitors_with_no_notary_running(
        seaweed: Seaweed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seaweed.configure(monkeypatch)
    async with live_notary(tmp_path, publish=f"s3://{seaweed.bucket}/{PREFIX}") as notary:
        calls = [await notary.notarize(x=i) for i in range(12)]
        trust, vkey, trust_args = notary.trust(), notary.vkey, notary.trust_args()
        await asyncio.to_thread(wait_for, "the bucket's checkpoint of 12",
                                lambda: bucket_size(seaweed) == 12)
    # The notary is gone; the bucket, read anonymously over plain HTTP, is the log.
    url = f"{seaweed.public_url}/{PREFIX}"
    report = await verify(saved(calls[0]), trust, log_url=url)
    assert statuses(report)["consistency"] == "passed", report.verdict.levels
    assert "size 12" in report.verdict.levels["consistency"].reason
    call = tmp_path / "call.json"
    call.write_text(json.dumps(calls[3].saved))
    code, out, err = await capture_cli("verify", str(call), *trust_args, "--log-url", url,
                                       "--no-state", "--json")
    assert code == 0 and json.loads(out)["levels"]["consistency"]["status"] == "passed", \
        out + err
    js = await asyncio.to_thread(
        subprocess.run,
        [node_binary(), str(REPO_ROOT / "js" / "bin" / "mcp-notary.js"), "verify", str(call),
         *trust_args, "--log-url", url, "--no-state", "--json"],
        capture_output=True, text=True, timeout=60, check=False)
    assert js.returncode == 0, js.stdout + js.stderr
    assert json.loads(js.stdout)["levels"]["consistency"]["status"] == "passed", js.stdout
    mon = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "notary.cli.main", "monitor", "--log", url, "--vkey", vkey,
         "--audit", "--once", "--state", str(tmp_path / "monitor.json"),
         "--evidence-dir", str(tmp_path / "ev")],
        capture_output=True, text=True, timeout=60, check=False,
        env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert mon.returncode == ExitCode.OK, mon.stdout + mon.stderr
    assert "12" in mon.stdout + mon.stderr


def test_sigkill_then_restart_completes_the_bucket(seaweed: Seaweed, tmp_path: Path) -> None:
    server = NotaryProcess(tmp_path / "data", env=seaweed.env(),
                           args=("--publish", f"s3://{seaweed.bucket}/{PREFIX}"))
    with server:
        key = server.create_api_key("p")
        issue(server, key, 3)
        wait_for("a first published checkpoint", lambda: bucket_size(seaweed) == 3)
        issue(server, key, 300, start=3)
        server.kill9()  # wherever its round was
        server.start()
        wait_for("the bucket to cover all 303", lambda: bucket_size(seaweed) == 303)
        keys = {k.removeprefix(PREFIX + "/") for k in seaweed.keys(PREFIX + "/")}
        want = {t.path() for t in tiles_for_size(303, entries=True)} | {"checkpoint"}
        assert want <= keys
        assert all(k in want or ".p/" in k for k in keys), sorted(keys - want)  # nothing else
        health = server.get("/healthz").json()
        assert health["publish"]["state"] == "ok" and health["publish"]["size"] == 303, health


def test_a_bucket_down_never_holds_receipts_and_the_lag_shows_until_it_catches_up(
        seaweed: Seaweed, tmp_path: Path) -> None:
    server = NotaryProcess(tmp_path / "data", env=seaweed.env(), split_stderr=True,
                           args=("--publish", f"s3://{seaweed.bucket}/{PREFIX}"))
    with server:
        key = server.create_api_key("p")
        issue(server, key, 2)
        wait_for("a first published checkpoint", lambda: bucket_size(seaweed) == 2)
        seaweed.stop()
        started = time.monotonic()
        issue(server, key, 20, start=2)  # every one a 201 while the bucket is away
        assert time.monotonic() - started < 30

        def lagging() -> bool:
            pub = server.get("/healthz").json().get("publish", {})
            return pub.get("state") == "lagging" and pub.get("behind") == 20

        wait_for("/healthz to say publishing lags", lagging)
        health = server.get("/healthz").json()
        assert health["status"] == "ok"  # writes are fine
        assert str(seaweed.ports["s3"]) not in json.dumps(health)  # no endpoint on a public page
        assert metric(server, "ledger_publish_lag_entries") == 20
        time.sleep(3)  # several retries
        seaweed.start()  # back, with what it had
        wait_for("the bucket to catch up", lambda: bucket_size(seaweed) == 22)
        wait_for("/healthz to say publishing is ok",
                 lambda: server.get("/healthz").json()["publish"]["state"] == "ok")
        assert metric(server, "ledger_publish_lag_entries") == 0
    lines = [json.loads(line) for line in server.stderr_bytes().splitlines()
             if line.startswith(b"{")]
    events = [e["event"] for e in lines if e.get("event", "").startswith("publish_")]
    # One line when it starts failing and one when it recovers, not one per retry.
    assert events.count("publish_failing") == 1, events
    assert events.count("publish_recovered") == 1, events


def test_an_object_planted_with_other_bytes_is_an_alarm_in_healthz_and_metrics(
        seaweed: Seaweed, tmp_path: Path) -> None:
    planted = b"not this log's bundle"
    seaweed.put(f"{PREFIX}/tile/entries/000.p/1", planted)
    server = NotaryProcess(tmp_path / "data", env=seaweed.env(),
                           args=("--publish", f"s3://{seaweed.bucket}/{PREFIX}"))
    with server:
        key = server.create_api_key("p")
        issue(server, key, 1)

        def stopped() -> bool:
            return server.get("/healthz").json().get("publish", {}).get("state") == "stopped"

        wait_for("/healthz to report the conflict", stopped)
        health = server.get("/healthz").json()
        assert health["status"] == "failing", health
        assert metric(server, "ledger_publish_conflicts_total") == 1
        issue(server, key, 1, start=1)  # receipts go on
    assert seaweed.get(f"{PREFIX}/tile/entries/000.p/1")[2] == planted  # never overwritten
    assert bucket_size(seaweed) == 0  # no checkpoint names what the bucket lacks


@pytest.mark.parametrize("target", ["s3://", "s3:///prefix", "gs://bucket/x", "s4://b/x",
                                    "s3://No_Such..Bucket/x"])
def test_a_publish_target_without_a_bucket_or_of_another_scheme_is_a_usage_error(
        tmp_path: Path, target: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTARY_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    for argv in (["notary.cli.main", "serve", "--data", str(tmp_path / "d"),
                  "--publish", target],
                 ["ledger.cli.main", "serve", str(tmp_path / "log"), "--publish", target],
                 ["ledger.cli.main", "export", str(tmp_path / "log"), target]):
        done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                              env=env, timeout=60, check=False)
        assert done.returncode == ExitCode.USAGE, (argv, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert "bucket" in done.stderr or "scheme" in done.stderr, done.stderr
