"""The store commands with ``--database postgresql://…``: API keys made and revoked by another
process take effect at once in a running frontend; keys are registered and published per
frontend; ``check`` audits the database; ``backup``/``restore`` refuse, pointing at pg_dump; the
URL (which may hold a password) is never echoed."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ledger.core.note import Ed25519Signer, Ed25519Verifier
from ledger.process.keyfile import write_secret
from notary.cli.main import main as notary_cli
from notary.operator.damage_marker import DAMAGE_FILE, record_damage
from notary.serving.commands import store_command
from notary.serving.config import Settings
from notary.serving.refusals import Unauthorized
from notary.store import check_database
from tests.notary_server import app_notary, capture_cli, run_cli


def cli_err(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = notary_cli(list(argv))
    return code, err.getvalue()


async def test_keys_made_and_revoked_by_the_cli_take_effect_at_once(tmp_path: Path,
                                                                    pg_url: str) -> None:
    async with app_notary(tmp_path / "a", database=pg_url) as served:
        notary = served.notary
        db = ("--data", str(served.data), "--database", pg_url)
        code, out = run_cli("apikey", "create", *db, "--account", "alice",
                            "--monthly-allowance", "3")
        assert code == 0, out
        key = out.strip().splitlines()[-1]
        account = await notary.authenticate(f"Bearer {key}")
        assert (account.name, account.monthly_allowance) == ("alice", 3)
        code, out = run_cli("apikey", "list", *db, "--json")
        assert code == 0 and '"alice"' in out
        code, _ = run_cli("apikey", "revoke", *db, key)
        assert code == 0
        # At once: nothing is issued for the key once its revocation committed, even to a
        # request authenticated before the notice arrived (the batch screen re-checks keys
        # when their version moved). run_cli blocked this event loop, so the notice is
        # still unread here.
        try:
            await notary.notarize(account, "s", "t", "7" * 64)
        except Unauthorized as e:
            assert "revoked" in str(e)
        else:
            raise AssertionError("a key revoked by another process issued a receipt")
        # And authentication refuses it as soon as the notice is read (a moment later).
        deadline = time.monotonic() + 10
        while True:
            try:
                await notary.authenticate(f"Bearer {key}")
            except Unauthorized as e:
                assert "revoked" in str(e)
                break
            assert time.monotonic() < deadline, "a key revoked by another process was accepted"
            await asyncio.sleep(0.05)
        # Another process now, as an operator's would be: on a thread, so this loop keeps
        # serving the notary meanwhile (its background jobs may hold a lock the check needs).
        code, out = await asyncio.to_thread(run_cli, "check", "--data", str(served.data),
                                            "--database", pg_url)
        assert code == 0 and out.startswith("ok:"), out


async def test_every_frontend_publishes_every_receipt_key(tmp_path: Path, pg_url: str) -> None:
    """Two frontends, each with its own receipt key (its own --data, the same log key): each
    signs with its own, and both JWKS list both, so any receipt verifies from either."""
    async with app_notary(tmp_path / "a", database=pg_url) as a:
        b_data = tmp_path / "b"
        b_data.mkdir(mode=0o700)
        for name in ("log.key", "log.vkey"):
            (b_data / name).write_bytes((a.data / name).read_bytes())
            (b_data / name).chmod(0o600)
        async with app_notary(b_data, database=pg_url) as b:
            ka, kb = a.notary.current_key.kid, b.notary.current_key.kid
            assert ka != kb
            async with aiohttp.ClientSession() as http:
                for served in (a, b):
                    async with http.get(f"{served.url}/.well-known/jwks.json") as r:
                        kids = {k["kid"] for k in (await r.json())["keys"]}
                    assert {ka, kb} <= kids


async def test_check_uses_the_key_of_the_log_it_checks(tmp_path: Path, pg_url: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``notary check --database URL`` without ``--data`` reads ``./notary-data``: when that
    holds another log's key (even one of the same origin), or none, the database is not called
    damaged; the check refuses and names the flag to add. With the log's own key it checks."""
    async with app_notary(tmp_path / "a", database=pg_url) as served:
        key = await served.new_api_key("alice")
        account = await served.notary.authenticate(f"Bearer {key}")
        await served.notary.notarize(account, "s", "t", "7" * 64)
        origin = Ed25519Verifier.from_vkey(served.vkey).name
        cwd = tmp_path / "elsewhere"
        cwd.mkdir()
        monkeypatch.chdir(cwd)
        check = ("check", "--database", pg_url)
        code, out, err = await capture_cli(*check)
        assert code == 2 and "--data" in err and "FAILED" not in err, (code, out, err)
        decoy = cwd / "notary-data"
        decoy.mkdir(mode=0o700)
        for name in (origin, "another.example"):
            other = Ed25519Signer.generate(name)
            (decoy / "log.key").unlink(missing_ok=True)
            write_secret(decoy / "log.key", other.private_key_text())
            (decoy / "log.vkey").write_text(other.verifier_key_text() + "\n")
            code, out, err = await capture_cli(*check)
            assert code == 2, (code, out, err)
            assert "--data" in err and "FAILED" not in err and "Restore" not in err, err
            assert "another log" in err, err
        (decoy / "log.vkey").write_text(served.vkey + "\n")
        code, out, err = await capture_cli(*check)
        assert code == 0 and out.startswith("ok:") and "at size 1" in out, (code, out, err)


async def test_a_frontend_directory_without_database_is_told_to_add_it(tmp_path: Path,
                                                                       pg_url: str) -> None:
    """A store command given a PostgreSQL frontend's --data but no --database is told to add
    it, not to run ``notary serve`` (which would make a new SQLite log there)."""
    async with app_notary(tmp_path / "a", database=pg_url) as served:
        code, out, err = await capture_cli("apikey", "list", "--data", str(served.data))
        assert code == 2 and "--database" in err and "notary serve" not in err, (out, err)


async def test_a_passing_check_clears_the_damage_a_frontend_recorded(tmp_path: Path,
                                                                    pg_url: str) -> None:
    """What a frontend that found damage tells the operator to run after restoring the
    database (the check, with its --data and --database) lets it write again."""
    async with app_notary(tmp_path / "a", database=pg_url) as served:
        data = served.data
    check = store_command(Settings(data=data, database=pg_url), "check", env={})
    record_damage(data, "a tile does not match", check=check)
    told = json.loads((data / DAMAGE_FILE).read_text())["clear"]
    program, *words = shlex.split(told.split("`")[1])
    assert program == "notary" and "--database" in words, told
    code, out, err = await capture_cli(*words)
    assert code == 0 and "cleared the damage" in err, (out, err)
    assert not (data / DAMAGE_FILE).exists()


def test_backup_and_restore_point_at_pg_dump(tmp_path: Path) -> None:
    url = "postgresql://notary:s3cret-pw@127.0.0.1:1/notary"
    for argv in (("backup", "--data", str(tmp_path), "--database", url, str(tmp_path / "b")),
                 ("restore", "--data", str(tmp_path), "--database", url, str(tmp_path / "b"))):
        code, err = cli_err(*argv)
        assert code == 2 and "pg_dump" in err, err
        assert "s3cret-pw" not in err


def test_a_malformed_url_is_refused_without_echoing_it(tmp_path: Path) -> None:
    code, err = cli_err("apikey", "list", "--data", str(tmp_path),
                        "--database", "postgresql://u:s3cret-pw@h:notaport/db")
    assert code == 2 and "malformed" in err and "s3cret-pw" not in err, err


def test_multi_host_urls_are_accepted() -> None:
    for url in ("postgresql://n@h1:5432,h2:5433/db?target_session_attrs=read-write",
                "postgresql://h1,h2/db", "postgresql://[::1]:5432/db", "postgres:///db"):
        check_database(url)


async def test_unknown_key_id_and_wrong_secret_send_the_same_queries(tmp_path: Path,
                                                                     pg_url: str) -> None:
    """As on SQLite (test_auth_work): both refusals do the same work, whatever the key id.
    With the LISTEN connection up and no change notified, that is no query at all; without
    it, one one-row read of the key version (the key table is reloaded only when it moved)."""
    async with app_notary(tmp_path / "a", database=pg_url) as served:
        notary = served.notary
        key = await served.new_api_key("alice")
        for i in range(5):
            await served.new_api_key(f"other{i}")
        key_id, secret = key[3:15], key[16:]
        wrong_secret = f"nk_{key_id}_{('B' if secret[0] == 'A' else 'A')}{secret[1:]}"
        unknown_id = f"nk_{'0' * 12}_{secret}"
        store = notary.store
        sent: list[tuple[str, str]] = []
        real = store._retrying  # type: ignore[attr-defined]

        class Recording:
            def __init__(self, conn: Any) -> None:
                self.conn = conn

            def __getattr__(self, name: str) -> Any:
                attr = getattr(self.conn, name)
                if name not in ("fetch", "fetchval", "fetchrow", "execute"):
                    return attr

                async def call(query: str, *args: Any) -> Any:
                    sent.append((name, query))
                    return await attr(query, *args)

                return call

        async def recording(fn: Any) -> Any:
            return await real(lambda conn: fn(Recording(conn)))

        store._retrying = recording  # type: ignore[attr-defined]

        async def work(token: str) -> list[tuple[str, str]]:
            sent.clear()
            try:
                await notary.authenticate(f"Bearer {token}")
            except Unauthorized:
                return list(sent)
            raise AssertionError("the key was accepted")

        deadline = time.monotonic() + 10.0
        while store._notices < 6:  # type: ignore[attr-defined]  # the keys' own notices
            assert time.monotonic() < deadline, "the key notifications never came"
            await asyncio.sleep(0.01)
        await work(wrong_secret)
        await work(unknown_id)
        known, unknown = await work(wrong_secret), await work(unknown_id)
        assert known == unknown == [], (known, unknown)

        store._relisten = lambda: None  # type: ignore[attr-defined]  # stays down
        store._listener.terminate()  # type: ignore[attr-defined]
        while store._listener is not None:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the LISTEN connection never closed"
            await asyncio.sleep(0.01)
        await work(wrong_secret)
        known, unknown = await work(wrong_secret), await work(unknown_id)
        assert known == unknown and len(known) == 1, (known, unknown)


def test_the_sqlite_default_never_imports_asyncpg() -> None:
    """asyncpg is the optional `postgres` extra: serving and administering on SQLite must work
    without it (its imports are deferred to the PostgreSQL branches)."""
    code = ("import sys, notary.cli.main, notary.http.app, notary.serving.startup, notary.store, "
            "notary.cli.check; assert 'asyncpg' not in sys.modules, 'asyncpg imported'")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=Path(__file__).resolve().parents[3])
