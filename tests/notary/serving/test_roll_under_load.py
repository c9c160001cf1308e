"""Rolling the log under load with SIGKILLs (issue 33), end to end on both stores: two
``notary serve`` frontends on one PostgreSQL database, and ``notary serve --workers 2`` on one
SQLite file, each under a bounded client loop while, in turn:

1. a ``notary log roll`` is SIGKILLed while it holds the log's lock, after a step of its
   transaction picked at random (tests/roll_child.py): nothing of it remains, load goes on in
   log 0;
2. a roll holds the lock while a frontend (a worker) is SIGKILLed, then commits: log 1;
3. the real ``notary log roll`` runs while a frontend (the whole server) is SIGKILLed at a
   random moment and restarted: log 2.

Then every server is stopped and started again, and: exactly one active log; each frozen log
ends with the successor record naming the next log, every other entry of it has its receipt
(no receipt after its final checkpoint, no gap); every acknowledged receipt (201) is served
as signed and verifies with the project's verifier (record, signature, inclusion), a frozen
log's against its final checkpoint; every checkpoint a client saw during the run is
consistent with its log's final (or current) checkpoint; the registry and the final
checkpoints are what they were before the restart; nothing was answered with a 500.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
import signal
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from ledger.core.checkpoint import open_checkpoint
from ledger.core.note import Ed25519Verifier, parse_note
from ledger.core.proofs import verify_consistency
from ledger.core.tlog_proof import decode_proof_bundle
from ledger.log.reader import LogReader
from notary.core.entry import decode_entry
from notary.core.jwks import Jwks
from notary.core.records import CallRecord, new_salt
from notary.core.successor import decode_successor
from notary.core.verification import verify_receipt
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import log_signer
from notary.store import open_store
from tests.notary_server import REPO_ROOT, NotaryProcess, child_pids
from tests.waiting import until

CLIENTS = 4
PAUSE = 0.02  # between two requests of a client: a bounded load the checks can go through
STEPS = ("write", "put_log", "switch_log")  # the roll transaction's steps (tests/roll_child.py)


@dataclass
class Load:
    """Clients notarizing against ``urls`` until ``stop``; what they were told, and every
    checkpoint they saw (in a receipt's proof, or polled at ``/checkpoint``)."""

    urls: list[str]
    key: str
    rng: random.Random
    acked: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    notes: set[bytes] = field(default_factory=set)
    statuses: Counter[int] = field(default_factory=Counter)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def client(self, http: aiohttp.ClientSession, n: int) -> None:
        rng = random.Random(self.rng.random())
        while not self.stop.is_set():
            url = rng.choice(self.urls)
            rec = CallRecord(server="srv", tool="t", arguments={"c": n}, result={"content": []},
                             salt=new_salt())
            body = {"server": "srv", "tool": "t", "call_sha256": rec.call_sha256()}
            try:
                async with http.post(url + "/v1/tool-calls", json=body,
                                     headers={"Authorization": f"Bearer {self.key}"}) as r:
                    self.statuses[r.status] += 1
                    got = await r.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError, ValueError):
                await asyncio.sleep(0.05)  # a server killed mid-request: nothing promised
                continue
            if r.status == 201:
                self.acked.append((url, got, rec.to_json()))
                self.notes.add(decode_proof_bundle(got["proof"].encode()).checkpoint)
            await asyncio.sleep(PAUSE)

    async def poll(self, http: aiohttp.ClientSession) -> None:
        while not self.stop.is_set():
            for url in self.urls:
                try:
                    async with http.get(url + "/checkpoint") as r:
                        if r.status == 200:
                            self.notes.add(await r.read())
                except (TimeoutError, aiohttp.ClientError):
                    pass
            await asyncio.sleep(0.1)

    def count(self, origin: str, url: str | None = None) -> int:
        return sum(1 for u, receipt, _ in self.acked
                   if receipt["ledger"]["origin"] == origin and url in (None, u))

    async def more(self, origin: str, at_least: int, *, each_url: bool = False) -> None:
        """Wait (bounded) for ``at_least`` more receipts of log ``origin`` (from every URL)."""
        urls: list[str | None] = list(self.urls) if each_url else [None]
        before = {u: self.count(origin, u) for u in urls}
        await until(lambda: all(self.count(origin, u) >= before[u] + at_least for u in urls),
                    f"{at_least} more receipts in {origin}", 60)


async def ledger_logs(http: aiohttp.ClientSession, url: str) -> list[dict[str, Any]]:
    async with http.get(url + "/v1/ledger") as r:
        assert r.status == 200
        logs: list[dict[str, Any]] = (await r.json())["logs"]
        return logs


async def held_roll(data: Path, database: str, step: str, hold: bool,
                    children: list[asyncio.subprocess.Process]) -> asyncio.subprocess.Process:
    """``notary log roll`` paused after ``step`` with the log's lock held (tests/roll_child);
    in ``children``."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.roll_child", str(data), database, step,
        *(["hold"] if hold else []), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, cwd=REPO_ROOT)
    children.append(child)
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 60)
    assert line == b"paused\n", line
    return child


@dataclass
class Rig:
    """What differs between the stores: the servers, and how a frontend dies."""

    data: Path  # holds log.key: where `notary log roll` runs
    database: str  # '' for the SQLite file
    servers: list[NotaryProcess]
    kill_one: Callable[[], Awaitable[None]]  # a frontend (a worker) SIGKILLed, mid-roll
    crash: Callable[[], Awaitable[None]]  # a frontend (the server) SIGKILLed and restarted
    after_hold: Callable[[], Awaitable[None]] = field(default=lambda: asyncio.sleep(0))


async def roll_three_ways(rig: Rig, load: Load, rng: random.Random) -> list[str]:
    """The three rolls of the module's docstring, under ``load``; the origins of logs 0–2."""
    where = ["--data", str(rig.data), *(["--database", rig.database] if rig.database else [])]
    children: list[asyncio.subprocess.Process] = []
    try:
        return await _roll_three_ways(rig, load, rng, where, children)
    finally:
        for child in children:  # a test that failed midway leaves no roll paused forever
            if child.returncode is None:
                child.kill()
                await child.wait()


async def _roll_three_ways(rig: Rig, load: Load, rng: random.Random, where: list[str],
                           children: list[asyncio.subprocess.Process]) -> list[str]:
    async with aiohttp.ClientSession() as http:
        origin0 = (await ledger_logs(http, load.urls[0]))[0]["origin"]
        await load.more(origin0, 20, each_url=True)
        # 1. The roll dies holding the lock: nothing of it remains.
        child = await held_roll(rig.data, rig.database, rng.choice(STEPS), False, children)
        await asyncio.sleep(rng.uniform(0.1, 0.5))
        child.send_signal(signal.SIGKILL)
        await child.wait()
        await load.more(origin0, 20, each_url=True)
        assert len(await ledger_logs(http, load.urls[0])) == 1
        # 2. A frontend dies while the roll holds the lock; then the roll commits.
        child = await held_roll(rig.data, rig.database, rng.choice(STEPS), True, children)
        await rig.kill_one()
        await asyncio.sleep(rng.uniform(0, 0.3))
        out, _ = await child.communicate(b"go\n")
        assert child.returncode == 0 and b"Froze log 0" in out, out
        await rig.after_hold()
        origin1 = (await ledger_logs(http, load.urls[0]))[1]["origin"]
        await load.more(origin1, 20, each_url=True)
        # 3. The command itself, while a frontend is SIGKILLed and restarted.
        roll = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "notary.cli.main", "log", "roll", *where,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO_ROOT)
        children.append(roll)
        await asyncio.sleep(rng.uniform(0, 1.2))
        await rig.crash()
        out, err = await asyncio.wait_for(roll.communicate(), 60)
        assert roll.returncode == 0 and b"Froze log 1" in out, (out, err)
        origin2 = (await ledger_logs(http, load.urls[0]))[2]["origin"]
        await load.more(origin2, 20, each_url=True)
    return [origin0, origin1, origin2]


async def run_load(rig: Rig, key: str, rng: random.Random) -> tuple[Load, list[str]]:
    load = Load([s.url for s in rig.servers], key, rng)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:
        tasks = [asyncio.create_task(load.client(http, n)) for n in range(CLIENTS)]
        tasks.append(asyncio.create_task(load.poll(http)))
        try:
            origins = await roll_three_ways(rig, load, rng)
        finally:
            load.stop.set()
            await asyncio.gather(*tasks)
    print(f"{len(load.acked)} acknowledged, statuses {dict(load.statuses)}, "
          f"{len(load.notes)} checkpoints seen")
    return load, origins


async def check_store(rig: Rig, load: Load, origins: list[str]) -> dict[str, int]:
    """With every server stopped: the registry, each frozen log's successor record and final
    checkpoint, and a receipt for every other entry of every log. Each log's size."""
    paths = Paths(rig.data)
    root = load_log_key(paths)
    store = await open_store(rig.database, paths.db)
    sizes: dict[str, int] = {}
    try:
        records = await store.logs()
        assert [(r.n, r.origin, r.state) for r in records] == [
            (0, origins[0], "frozen"), (1, origins[1], "frozen"), (2, origins[2], "active")]
        for record in records:
            view = store.for_log(record.n)
            head = await view.latest()
            assert head is not None
            cp, _ = open_checkpoint(head.note, log_signer(root, record).verifier())
            entries = await LogReader(view).entries(0, cp.size)
            if record.state == "frozen":
                assert cp.size == record.final_size
                nxt = records[record.n + 1]
                successor = decode_successor(entries[-1])
                assert (successor.origin, successor.vkeys, successor.previous) == (
                    nxt.origin, nxt.vkeys, record.origin)
                entries = entries[:-1]
            for index, data in enumerate(entries):
                stored = await store.receipt_by_digest(decode_entry(data).call_sha256_hex)
                assert stored is not None and (stored.origin, stored.index) == (
                    record.origin, index), (record.origin, index)
            sizes[record.origin] = cp.size
    finally:
        await store.close()
    for _, receipt, _ in load.acked:  # a frozen log's receipts all lie before its last entry
        assert receipt["ledger"]["index"] < sizes[receipt["ledger"]["origin"]] - (
            receipt["ledger"]["origin"] != origins[2])
    return sizes


async def served_state(http: aiohttp.ClientSession, url: str
                       ) -> tuple[list[tuple[str, str, int]], list[tuple[str, int, bytes]]]:
    """The log list and each log's checkpoint (origin, size, root) as ``url`` serves them."""
    logs = await ledger_logs(http, url)
    heads = []
    for n, g in enumerate(logs):
        async with http.get(f"{url}/logs/{n}/checkpoint") as r:
            cp, _ = open_checkpoint(await r.read(), Ed25519Verifier.from_vkey(g["vkeys"][0]))
        heads.append((cp.origin, cp.size, cp.root_hash))
    return [(g["origin"], g["state"], g["size"]) for g in logs], heads


async def check_served(rig: Rig, load: Load, sizes: dict[str, int]) -> None:
    """Against the restarted servers: every acknowledged receipt served as signed and valid,
    every checkpoint seen consistent with its log's newest, and a new receipt in the active
    log right after the last one."""
    async with aiohttp.ClientSession() as http:
        url = rig.servers[0].url
        logs = await ledger_logs(http, url)
        assert [g["state"] for g in logs] == ["frozen", "frozen", "active"]
        assert [(g["origin"], g["size"]) for g in logs] == list(sizes.items())
        numbers = {g["origin"]: n for n, g in enumerate(logs)}
        keys = {g["origin"]: Ed25519Verifier.from_vkey(g["vkeys"][0]) for g in logs}
        async with http.get(url + "/.well-known/jwks.json") as r:
            jwks = Jwks(await r.json())
        sem = asyncio.Semaphore(8)

        async def check(i: int, receipt: dict[str, Any], record: dict[str, Any]) -> None:
            origin = receipt["ledger"]["origin"]
            async with sem, http.get(f"{rig.servers[i % len(rig.servers)].url}"
                                     f"/v1/tool-calls/{receipt['id']}") as r:
                assert r.status == 200, f"receipt {receipt['id']} was lost"
                stored = await r.json()
            assert {k: v for k, v in stored.items() if k != "proof"} == \
                {k: v for k, v in receipt.items() if k != "proof"}
            for got in (receipt, stored):
                verdict = verify_receipt(got, record=record, jwks=jwks, log_verifier=keys[origin])
                assert verdict.valid, verdict.to_json()
            note = decode_proof_bundle(stored["proof"].encode()).checkpoint
            if origin != logs[-1]["origin"]:  # a frozen log's proof: to its final checkpoint
                assert open_checkpoint(note, keys[origin])[0].size == sizes[origin]

        await asyncio.gather(*(check(i, receipt, record)
                               for i, (_, receipt, record) in enumerate(load.acked)))
        roots = {origin: root for origin, _, root in (await served_state(http, url))[1]}
        seen: dict[tuple[str, int], bytes] = {}  # each tree seen once: (origin, size) -> root
        for note in load.notes:
            origin = parse_note(note).text.split("\n", 1)[0]
            cp, _ = open_checkpoint(note, keys[origin])
            assert seen.setdefault((origin, cp.size), cp.root_hash) == cp.root_hash, "a fork"
        for (origin, size), root in seen.items():
            new = sizes[origin]
            assert size <= new
            if size == 0:
                continue  # the empty tree: a prefix of every tree
            async with http.get(f"{url}/logs/{numbers[origin]}/v1/ledger/proofs/consistency"
                                f"?old={size}&new={new}") as r:
                assert r.status == 200, await r.text()
                proof = [base64.b64decode(h) for h in (await r.json())["proof"]]
            verify_consistency(size, new, root, roots[origin], proof)
        # One more receipt, on every server: in the active log, after the last one.
        for n, server in enumerate(rig.servers):
            rec = CallRecord(server="srv", tool="t", arguments={"after": n},
                             result={"content": []}, salt=new_salt())
            async with http.post(server.url + "/v1/tool-calls",
                                 json={"server": "srv", "tool": "t",
                                       "call_sha256": rec.call_sha256()},
                                 headers={"Authorization": f"Bearer {load.key}"}) as r:
                assert r.status == 201, await r.text()
                ledger = (await r.json())["ledger"]
            assert (ledger["origin"], ledger["index"]) == (logs[-1]["origin"],
                                                           sizes[logs[-1]["origin"]] + n)


async def restart_and_check(rig: Rig, load: Load, origins: list[str]) -> None:
    assert set(load.statuses) <= {201, 503} and load.acked, load.statuses  # never a 500
    async with aiohttp.ClientSession() as http:
        before = await served_state(http, rig.servers[0].url)
    await asyncio.gather(*(asyncio.to_thread(server.stop) for server in rig.servers))
    sizes = await check_store(rig, load, origins)
    await asyncio.gather(*(asyncio.to_thread(server.start) for server in rig.servers))
    async with aiohttp.ClientSession() as http:
        for server in rig.servers:  # what each server serves is what it was (the active
            logs, heads = await served_state(http, server.url)  # log's newest, not a lag)
            assert (logs[:-1], heads[:-1]) == (before[0][:-1], before[1][:-1])
            assert logs[-1] == (origins[2], "active", sizes[origins[2]])
            assert heads[-1][:2] == (origins[2], sizes[origins[2]])
    await check_served(rig, load, sizes)


def _api_key(server: NotaryProcess, database: str) -> str:
    out = server.cli("apikey", "create", "--data", str(server.data_dir),
                     *(["--database", database] if database else []), "--account", "a").stdout
    return out.strip().splitlines()[-1]


async def test_roll_under_load_across_postgresql_frontends(
        tmp_path: Path, pg_url: str, seeded_rng: random.Random) -> None:
    first = NotaryProcess(tmp_path / "f0", args=["--database", pg_url])
    await asyncio.to_thread(first.start)
    second_data = tmp_path / "f1"
    second_data.mkdir(mode=0o700)
    for name in ("log.key", "log.vkey"):  # a second machine: the log key copied, its own rest
        (second_data / name).write_bytes((first.data_dir / name).read_bytes())
        (second_data / name).chmod(0o600)
    second = NotaryProcess(second_data, args=["--database", pg_url])
    await asyncio.to_thread(second.start)

    async def kill_first() -> None:
        await asyncio.to_thread(first.kill9)

    async def restart_first() -> None:
        await asyncio.to_thread(first.start)

    async def crash_second() -> None:
        await asyncio.to_thread(second.restart, crash=True)

    rig = Rig(first.data_dir, pg_url, [first, second], kill_first, crash_second, restart_first)
    try:
        load, origins = await run_load(rig, _api_key(first, pg_url), seeded_rng)
        await restart_and_check(rig, load, origins)
    finally:
        for server in rig.servers:
            await asyncio.to_thread(server.stop)



async def test_roll_under_load_with_sqlite_workers(tmp_path: Path,
                                                   seeded_rng: random.Random) -> None:
    server = NotaryProcess(tmp_path / "data", args=["--workers", "2"])
    await asyncio.to_thread(server.start)

    async def kill_a_worker() -> None:
        assert server.proc is not None
        pid = server.proc.pid
        await until(lambda: len(child_pids(pid)) == 2, "both workers", 30)
        os.kill(seeded_rng.choice(child_pids(pid)), signal.SIGKILL)

    async def crash() -> None:
        await asyncio.to_thread(server.restart, crash=True)

    rig = Rig(server.data_dir, "", [server], kill_a_worker, crash)
    try:
        load, origins = await run_load(rig, _api_key(server, ""), seeded_rng)
        await restart_and_check(rig, load, origins)
    finally:
        await asyncio.to_thread(server.stop)
