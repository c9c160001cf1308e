"""The ``notary`` command line: first run, settings precedence, key files, hashing, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from notary.cli.serve import command_name
from notary.core.records import CallRecord
from notary.serving.config import ConfigError, Settings, resolve
from tests.notary_server import NotaryProcess, _child_env


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "notary.cli.main", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[3])))


def test_settings_precedence(tmp_path: Path) -> None:
    toml = tmp_path / "n.toml"
    toml.write_text('listen = "127.0.0.1:7000"\nmax_body = 2000\norigin = "from.toml"\n'
                    'public_url = "https://toml.example"\n')
    env = {"NOTARY_LISTEN": "127.0.0.1:7001", "NOTARY_MAX_BODY": "3000"}
    s = resolve({"listen": "127.0.0.1:7002"}, env=env, config_file=toml)
    assert s.listen == "127.0.0.1:7002"  # flag beats everything
    assert s.max_body == 3000  # environment beats the file
    assert s.origin == "from.toml"  # file beats the default
    assert s.data == Settings().data  # default
    assert s.base_url == "https://toml.example"
    with pytest.raises(ConfigError, match="unknown setting"):
        bad = tmp_path / "bad.toml"
        bad.write_text('lisen = "x"\n')
        resolve({}, env={}, config_file=bad)
    with pytest.raises(ConfigError, match="HOST:PORT"):
        resolve({"listen": "nonsense"}, env={})


def test_first_run_prints_keys_and_refuses_readable_key(tmp_path: Path) -> None:
    server = NotaryProcess(tmp_path / "data")
    server.start()
    server.stop()
    out = server.log_text()
    assert "Log verifier key:" in out and "/.well-known/jwks.json" in out
    assert f"apikey create --data {tmp_path / 'data'}" in out
    key = tmp_path / "data" / "log.key"
    assert key.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "data" / "notary.store.sqlite").stat().st_mode & 0o077 == 0
    for seed in (tmp_path / "data" / "receipt-keys").iterdir():
        assert seed.stat().st_mode & 0o777 == 0o600
    key.chmod(0o644)
    res = run("serve", "--data", str(tmp_path / "data"), "--listen", "127.0.0.1:1", cwd=tmp_path)
    assert res.returncode == 2 and "chmod 600" in res.stderr


def test_hash_command(tmp_path: Path) -> None:
    rec = CallRecord(server="s", tool="t", arguments={"a": [1, 2.5, "é"]},
                     result={"content": [{"type": "text", "text": "ok"}], "isError": False},
                     salt="00" * 16)
    path = tmp_path / "record.json"
    path.write_text(json.dumps({**rec.to_json(), "result": {**rec.result, "_meta": {"x": 1}}}))
    res = run("hash", str(path), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == rec.call_sha256()
    path.write_text(json.dumps({**rec.to_json(), "arguments": {"n": 2**60 + 1}}))
    res = run("hash", str(path), cwd=tmp_path)
    assert res.returncode == 2 and "$.arguments.n" in res.stderr


def test_apikey_lifecycle(tmp_path: Path) -> None:
    with NotaryProcess(tmp_path / "data") as server:
        created = server.cli("apikey", "create", "--data", str(server.data_dir), "--account",
                             "ops", "--monthly-allowance", "5")
        token = created.stdout.strip().splitlines()[-1]
        assert token.startswith("nk_") and created.stdout.count(token) == 1
        # Piped through `tail -1` (as the README does) the key comes out alone.
        piped = subprocess.run(
            f"{sys.executable} -m notary.cli.main apikey create --data {server.data_dir} "
            "--account ops2 | tail -1", shell=True, capture_output=True, text=True,
            env=_child_env(None), check=True)
        assert re.fullmatch(r"nk_[A-Za-z0-9_-]+\n", piped.stdout), piped.stdout
        listed = server.cli("apikey", "list", "--data", str(server.data_dir)).stdout
        assert "ops" in listed and "active" in listed and token not in listed
        rows = json.loads(server.cli("apikey", "list", "--data", str(server.data_dir),
                                     "--json").stdout)
        stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
        assert all(re.fullmatch(stamp, r["created"]) and r["revoked"] is None for r in rows)
        server.cli("apikey", "revoke", "--data", str(server.data_dir), token.split("_")[1])
        assert "revoked" in server.cli("apikey", "list", "--data", str(server.data_dir)).stdout
        rows = json.loads(server.cli("apikey", "list", "--data", str(server.data_dir),
                                     "--json").stdout)
        assert re.fullmatch(stamp, rows[0]["revoked"]), rows
        again = server.cli("apikey", "revoke", "--data", str(server.data_dir), "nosuchkey",
                           check=False)
        assert again.returncode == 2
        bad = server.cli("apikey", "create", "--data", str(server.data_dir), "--account",
                         "bad name!", check=False)
        assert bad.returncode == 2


def test_database_setting(tmp_path: Path) -> None:
    """--database picks the store; a memory store is refused where it cannot be reached."""
    with NotaryProcess(tmp_path / "mem", args=("--database", "memory:")) as server:
        health = server.get("/healthz").json()
        assert (health["status"], health["size"]) == ("ok", 0)
        assert server.get("/.well-known/jwks.json").json()["keys"]  # its key is registered
        assert not (server.data_dir / "notary.store.sqlite").exists()
        listed = server.cli("apikey", "list", "--data", str(server.data_dir), "--database",
                            "memory:", check=False)
        assert listed.returncode == 2 and "memory:" in listed.stderr
    res = run("serve", "--data", str(tmp_path / "x"), "--database", "postgres:nope", cwd=tmp_path)
    assert res.returncode == 2 and "database 'postgres:nope' is not supported" in res.stderr
    assert "database database" not in res.stderr  # the setting's name, then its problem, once
    res = run("apikey", "list", "--data", "none", cwd=tmp_path)
    suggested = f"run `notary serve --data {tmp_path / 'none'}` once first"  # from anywhere
    assert res.returncode == 2 and suggested in res.stderr, res.stderr


async def test_sigterm_drains_pending_appends(tmp_path: Path) -> None:
    server = NotaryProcess(tmp_path / "data").start()
    key = server.create_api_key("drain")
    issued: list[str] = []
    async with aiohttp.ClientSession() as http:
        async def client() -> None:
            # Post until the server goes away; every 201 is a promise the log must keep.
            for _ in range(2000):
                body = {"server": "s", "tool": "t", "call_sha256": os.urandom(32).hex()}
                try:
                    async with http.post(server.url + "/v1/tool-calls", json=body,
                                         headers={"Authorization": f"Bearer {key}"}) as r:
                        data = await r.json(content_type=None)
                        if r.status != 201:
                            return
                        issued.append(data["id"])
                except (aiohttp.ClientError, ValueError):
                    return

        tasks = [asyncio.create_task(client()) for _ in range(32)]
        for _ in range(600):  # bounded wait until the load is really flowing
            if len(issued) >= 50:
                break
            await asyncio.sleep(0.02)
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        await asyncio.gather(*tasks)
    assert server.proc.wait(30) == 0, server.log_text()
    assert len(issued) >= 50
    server.start()
    try:
        for receipt_id in issued:
            assert server.get(f"/v1/tool-calls/{receipt_id}").status == 200, receipt_id
    finally:
        server.stop()


def test_version_is_the_package_version(tmp_path: Path) -> None:
    """``notary --version`` and ``ledger --version`` print the package's version (the
    one pyproject.toml declares); ``mcp-notary --version`` is tested in js/test/cli.test.js."""
    import tomllib  # deferred: only this test reads pyproject.toml

    root = Path(__file__).resolve().parents[3]
    version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    for module, prog in (("notary.cli.main", "notary"), ("ledger.cli.main", "ledger")):
        r = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True,
                           text=True, cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL,
                           env=_child_env(None))
        assert (r.returncode, r.stdout.strip()) == (0, f"{prog} {version}"), r.stderr


def test_the_banner_names_the_command_as_it_can_be_called(tmp_path: Path) -> None:
    """`notary` on PATH is named bare; from a clone (`.venv/bin/notary`, not on PATH) the lines
    the first run prints name the path, so they can be pasted as they are; so for `python -m`."""
    venv_bin = tmp_path / ".venv" / "bin"
    assert command_name("/usr/bin/notary", ".venv/bin/notary", tmp_path) == "notary"
    assert command_name(None, ".venv/bin/notary", Path.cwd()) == ".venv/bin/notary"
    assert command_name(None, str(venv_bin / "notary"), tmp_path) == ".venv/bin/notary"
    assert command_name(None, str(venv_bin / "notary"), tmp_path / "elsewhere") == \
        str(venv_bin / "notary")
    # python -m: the same again, unless `notary` is on PATH
    assert command_name("/usr/bin/notary", "/x/notary/cli/main.py", tmp_path) == "notary"
    assert command_name(None, "/x/notary/cli/main.py", tmp_path, "/opt/py 3/python") == \
        "'/opt/py 3/python' -m notary.cli.main"


def test_keys_list_shows_the_log_keys_and_which_receipt_key_signs(tmp_path: Path) -> None:
    with NotaryProcess(tmp_path / "data") as server:
        server.cli("keys", "rotate", "--data", str(server.data_dir))
        listed = json.loads(server.cli("keys", "list", "--data", str(server.data_dir),
                                       "--json").stdout)
        ledger = server.get("/v1/ledger").json()
        jwks = server.get("/.well-known/jwks.json").json()
    assert [k["vkey"] for k in listed["log_keys"]] == ledger["vkeys"]
    assert [k["algorithm"] for k in listed["log_keys"]] == ["Ed25519", "ML-DSA-44"]
    kids = [k["kid"] for k in listed["receipt_keys"]]
    assert len(kids) == 2 and {k["kid"] for k in jwks["keys"]} <= set(kids)
    assert [k["signs"] for k in listed["receipt_keys"]] == [False, True]  # the rotated one
    text = run("keys", "list", "--data", str(tmp_path / "data"), cwd=tmp_path)
    assert text.returncode == 0 and "(signs new receipts)" in text.stdout
    assert ledger["vkeys"][1] in text.stdout
