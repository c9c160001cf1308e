"""``--publish`` through a roll (docs/lifecycle.md): each log gets its own prefix, log 0 at the
root and log n under ``logs/<n>/``; the frozen log's prefix ends complete at its final
checkpoint, and the next log's tiles never land in the old prefix. For both sinks: a directory
and a SeaweedFS bucket."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import Ed25519Verifier
from ledger.core.tiles import tiles_for_size
from notary.http.publishing import PUBLISHING
from tests.notary_server import app_notary, capture_cli
from tests.seaweed import Seaweed


def reader(kind: str, tmp_path: Path, request: pytest.FixtureRequest,
           monkeypatch: pytest.MonkeyPatch
           ) -> tuple[str, Callable[[str], bytes | None], Callable[[str], set[str]]]:
    """(the --publish target, read a path, list the paths under a prefix)."""
    if kind == "dir":
        out = tmp_path / "static"

        def read_file(path: str) -> bytes | None:
            p = out / path
            return p.read_bytes() if p.is_file() else None

        def list_files(prefix: str) -> set[str]:
            base = out / prefix
            skip = {"logs"} if not prefix else set()
            return {str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()
                    and p.relative_to(base).parts[0] not in skip and not p.name.startswith(".")}

        return str(out), read_file, list_files
    aws: Seaweed = request.getfixturevalue("seaweed")
    aws.configure(monkeypatch)

    def read_key(path: str) -> bytes | None:
        status, _, body = aws.get(f"pre/{path}")
        return body if status == 200 else None

    def list_keys(prefix: str) -> set[str]:
        keys = {k.removeprefix(f"pre/{prefix}") for k in aws.keys(f"pre/{prefix}")}
        return {k for k in keys if prefix or not k.startswith("logs/")}

    return f"s3://{aws.bucket}/pre", read_key, list_keys


@pytest.mark.parametrize("kind", ["dir", "s3"])
async def test_each_log_has_its_own_prefix_and_a_frozen_one_is_complete(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    target, read, listing = reader(kind, tmp_path, request, monkeypatch)
    data = tmp_path / "data"

    def size_at(prefix: str) -> int:
        note = read(prefix + "checkpoint")
        return -1 if note is None else int(note.split(b"\n")[1])

    async def wait(prefix: str, size: int) -> None:
        deadline = time.monotonic() + 60  # generous: not a timing assertion
        while await asyncio.to_thread(size_at, prefix) != size:
            assert time.monotonic() < deadline, f"{prefix or 'root'} never reached {size}"
            await asyncio.sleep(0.1)

    async with app_notary(data, publish=target) as notary, aiohttp.ClientSession() as http:
        key = await notary.new_api_key("a")

        async def issue(i: int) -> None:
            body = {"server": "s", "tool": "t", "call_sha256": f"{i:064x}"}
            async with http.post(notary.url + "/v1/tool-calls", json=body,
                                 headers={"Authorization": f"Bearer {key}"}) as r:
                assert r.status == 201, await r.text()

        for i in range(3):
            await issue(i)
        await wait("", 3)
        code, _, err = await capture_cli("log", "roll", "--data", str(data))
        assert code == 0, err
        for i in range(3, 5):
            await issue(i)  # into log 1
        await wait("logs/1/", 2)
        await wait("", 4)  # log 0's final checkpoint: its 3 entries and the successor record
        async with http.get(notary.url + "/v1/ledger") as r:
            logs = (await r.json())["logs"]
    for n, prefix, size in ((0, "", 4), (1, "logs/1/", 2)):
        note = read(prefix + "checkpoint")
        assert note is not None
        verifier = Ed25519Verifier.from_vkey(logs[n]["vkeys"][0])
        cp, _ = open_checkpoint(note, verifier)  # each prefix: its own log, its own key
        assert cp.origin == logs[n]["origin"] and cp.size == size
        paths = listing(prefix)
        want = {t.path() for t in tiles_for_size(size, entries=True)} | {"checkpoint"}
        assert want <= paths, (prefix, sorted(want - paths))
        assert all(p in want or ".p/" in p for p in paths), (prefix, sorted(paths - want))
    assert logs[0]["state"] == "frozen" and logs[0]["size"] == 4


async def test_several_postgresql_frontends_publish_through_one_lease(
        seaweed: Seaweed, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two frontends of one PostgreSQL log with the same ``--publish s3://``: one publishes at
    a time (the database's lease); when it stops, the other takes over and goes on."""
    seaweed.configure(monkeypatch)
    target = f"s3://{seaweed.bucket}/pg"

    def size() -> int:
        status, _, body = seaweed.get("pg/checkpoint")
        return int(body.split(b"\n")[1]) if status == 200 else -1

    async def until(what: str, ok: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 60  # generous: not a timing assertion
        while not await asyncio.to_thread(ok):
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.1)

    b_data = tmp_path / "b"
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(app_notary(tmp_path / "a", database=pg_url,
                                                       publish=target))
        b_data.mkdir(mode=0o700)
        for name in ("log.key", "log.vkey"):  # a second frontend: the same log key
            (b_data / name).write_bytes((a.data / name).read_bytes())
            (b_data / name).chmod(0o600)
        b = await stack.enter_async_context(app_notary(b_data, database=pg_url,
                                                       publish=target))
        http = await stack.enter_async_context(aiohttp.ClientSession())
        key = await a.new_api_key("a")

        async def issue(url: str, i: int) -> None:
            body = {"server": "s", "tool": "t", "call_sha256": f"{i:064x}"}
            async with http.post(url + "/v1/tool-calls", json=body,
                                 headers={"Authorization": f"Bearer {key}"}) as r:
                assert r.status == 201, await r.text()

        publishers = [a.app[PUBLISHING], b.app[PUBLISHING]]
        await until("a publisher", lambda: any(p.running for p in publishers))
        await asyncio.sleep(2.5)  # more than a lease retry: the other stays out
        assert [p.running for p in publishers].count(True) == 1
        for i in range(4):
            await issue((a, b)[i % 2].url, i)
        await until("the bucket to cover 4", lambda: size() == 4)
        held = 0 if publishers[0].running else 1
        await (a, b)[held].stop()
        other = (a, b)[1 - held]
        await until("the other frontend to take over", lambda: publishers[1 - held].running)
        for i in range(4, 6):
            await issue(other.url, i)
        await until("the bucket to cover 6", lambda: size() == 6)
