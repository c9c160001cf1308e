"""The notary's store contract (``notary.store.base``), the same tests on every backend.

Receipts go through the real write path (the notary's screen and hook inside the sequencer's
batch transaction) and must come back exactly as signed; accounts, keys and usage through the
typed methods; and two notaries on one SQLite file or one PostgreSQL database (two processes,
as far as the store can tell) never log a digest twice or overspend an allowance, because both
are decided under the log's lock.

``backend`` is "sqlite", "memory", or the URL of a fresh database in this test process's
throwaway PostgreSQL cluster.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core.compact import bundle_entry, encode_bundle_entry
from ledger.storage.base import WitnessState
from ledger.storage.memory import MemoryLogs, MemoryWriteTx
from notary.core.canonical import canonical_json
from notary.core.entry import decode_entry
from notary.core.ids import b64url_decode, new_receipt_id
from notary.core.receipts import Receipt
from notary.operator import admin
from notary.serving.clock_guard import utc_now
from notary.serving.keys import Paths
from notary.serving.refusals import DigestConflict, QuotaExceeded, StoreCorrupt
from notary.serving.service import Account, Notary
from notary.store import open_store
from notary.store.base import NotaryStore, notary_tx
from notary.store.memory import MemoryNotaryStore
from notary.store.sqlite import SqliteNotaryStore
from notary.store.sqlite_schema import SCHEMA_VERSION, id_key
from tests.notary_server import (
    BASE_URL,
    UNLIMITED,
    digest,
    headless_notary,
    issue,
)

# --- receipts -----------------------------------------------------------------------------


async def test_receipts_come_back_exactly_as_signed(tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        # Concurrent, so a few batches fill a whole bundle and a partial one (and every
        # request is answered only once its batch is durable).
        answers = await asyncio.gather(*(issue(notary, n, server=f"s{n % 3}")
                                         for n in range(300)))
        issued = sorted((r for r, _ in answers), key=lambda r: r.index)
        store = notary.store
        for receipt in issued:
            signed = receipt.without_proof()
            for got in (await store.receipt_by_id(receipt.id),
                        await store.receipt_by_digest(receipt.call_sha256)):
                assert got is not None
                assert got == signed
                assert canonical_json(got.to_json()) == canonical_json(signed.to_json())
            notary.jwks.verify(signed)
        assert await store.receipt_by_id("tc_AAAAAAAAAAAAAAAAAAAAAA") is None
        assert await store.receipt_by_digest(digest(10_000)) is None


_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(_names, _names, st.binary(min_size=32, max_size=32)),
                      min_size=1, max_size=8, unique_by=lambda c: c[2]),
       backend=st.sampled_from(["sqlite", "memory"]),  # one log per example: no shared cluster
       base=st.sampled_from([BASE_URL, "https://n.example/some/path", "http://[::1]:9"]))
def test_round_trip_is_byte_for_byte(calls: list[tuple[str, str, bytes]], backend: str,
                                     base: str) -> None:
    """Any names, digests and base URL: the stored receipt's JCS is the signed JCS."""
    async def run(data: Path) -> None:
        async with headless_notary(data, backend, base) as notary:
            issued = await asyncio.gather(*(notary.notarize(UNLIMITED, s, t, d.hex())
                                            for s, t, d in calls))
            for receipt, created in issued:
                assert created
                stored = await notary.store.receipt_by_id(receipt.id)
                assert stored is not None
                assert stored.signed_bytes() == receipt.signed_bytes()
                assert canonical_json(stored.to_json()) == \
                    canonical_json(receipt.without_proof().to_json())
                assert stored.entry_url == f"{base}/v1/ledger/entries/{receipt.index}"
                notary.jwks.verify(stored)

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp) / "d"))


async def test_a_failed_batch_stores_nothing(tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        await issue(notary, 1)
        before = (await notary.store.latest(), await notary.store.usage("alice", "2000-01"))
        real_hook = notary.hook
        assert notary.log is not None and notary.log.sequencer is not None

        async def failing_hook(tx: object, items: object) -> None:
            await real_hook(tx, items)  # type: ignore[arg-type]
            raise RuntimeError("disk on fire")

        notary.log.sequencer.hook = failing_hook
        with pytest.raises(RuntimeError, match="disk on fire"):
            await issue(notary, 2)
        notary.log.sequencer.hook = real_hook
        assert await notary.store.receipt_by_digest(digest(2)) is None
        assert (await notary.store.latest(), await notary.store.usage("alice", "2000-01")) \
            == before
        receipt, created = await issue(notary, 2)  # and the log goes on where it was
        assert created and receipt.index == 1


async def test_screen_reads_committed_receipts_and_usage(tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        receipt, _ = await issue(notary, 1, Account("alice", 5))
        month = receipt.issued_at[:7]
        async with notary.store.transaction() as tx:
            found = await notary_tx(tx).screen([digest(1), digest(2)], [("alice", month),
                                                                         ("bob", month)])
        assert found.logged == {digest(1): receipt.without_proof()}
        assert found.usage == {("alice", month): 1, ("bob", month): 0}


def test_notary_tx_refuses_a_plain_log_transaction() -> None:
    with pytest.raises(TypeError, match="not a notary store"):
        notary_tx(MemoryWriteTx(MemoryLogs()))


async def test_issued_at_never_decreases_along_the_log(tmp_path: Path, shared: str) -> None:
    """B's clock is behind A's (by less than clock_guard.MAX_AHEAD; further, B refuses: see
    test_clock_ahead.py): B's receipt, logged after A's, is issued at A's time."""
    data = tmp_path / "d"
    async with headless_notary(data, shared) as a, headless_notary(data, shared) as b:
        ahead, _ = await issue(a, 1)
        b.clock = lambda: utc_now() - timedelta(seconds=2)
        late, _ = await issue(b, 2)
        assert late.index == ahead.index + 1 and late.issued_at == ahead.issued_at
        stored = await a.store.receipt_by_id(late.id)
        assert stored is not None and stored.issued_at == ahead.issued_at
        b.jwks.verify(stored)  # signed with the time it was logged with
        assert a.log is not None
        entries = await a.log.reader.entries(0, 2)
        assert [decode_entry(e).issued_at for e in entries] == [ahead.issued_at] * 2
        # Later receipts go on from there, in order.
        answers = await asyncio.gather(*(issue(a if n % 2 else b, n) for n in range(3, 40)))
        by_index = sorted((r for r, _ in answers), key=lambda r: r.index)
        times = [ahead.issued_at, *(r.issued_at for r in by_index)]
        assert times == sorted(times)


async def test_search(tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        calls = [(f"s{n % 3}", f"t{n % 2}") for n in range(60)]
        issued = []
        for i in range(0, 60, 20):  # three batches, so the times differ
            answers = await asyncio.gather(*(issue(notary, n, server=calls[n][0],
                                                   tool=calls[n][1]) for n in range(i, i + 20)))
            issued += [r.without_proof() for r, _ in answers]
            await asyncio.sleep(0.01)
        newest = sorted(issued, key=lambda r: (r.issued_at, r.index), reverse=True)
        store = notary.store

        def expect(server: str | None = None, tool: str | None = None, since: str | None = None,
                   until: str | None = None) -> list[Receipt]:
            return [r for r in newest if (server is None or r.server == server)
                    and (tool is None or r.tool == tool)
                    and (since is None or r.issued_at >= since)
                    and (until is None or r.issued_at < until)]

        mid = newest[30].issued_at
        for kwargs in ({}, {"server": "s1"}, {"tool": "t0"}, {"server": "s2", "tool": "t1"},
                       {"since": mid}, {"until": mid}, {"server": "s0", "since": mid},
                       {"tool": "t1", "until": mid}, {"since": "2099-01-01T00:00:00.000Z"}):
            want = expect(**kwargs)
            assert await store.search_receipts(**kwargs, limit=100) == want, kwargs
            # Paging with (issued_at, index) cursors walks the same list.
            pages: list[Receipt] = []
            before: tuple[str, int] | None = None
            while True:
                page = await store.search_receipts(**kwargs, before=before, limit=7)
                pages += page
                if len(page) < 7:
                    break
                before = (page[-1].issued_at, page[-1].index)
            assert pages == want, kwargs
        assert await store.search_receipts(server="nobody") == []
        assert await store.search_receipts(server="s0", tool="never") == []
        page, last = await notary.search(server="s1", tool=None, since=None, until=None,
                                         before=None, limit=5)
        assert page == expect(server="s1")[:5] and last == (page[-1].issued_at, page[-1].index)


# The search indexes of stores created before 2026-12-01: the same order, with the rowid
# (``idx``) stored a second time at the end of each entry.
EARLIER_INDEXES = (("receipts_by_server", "server, idx"), ("receipts_by_tool", "tool, idx"),
                   ("receipts_by_server_tool", "server, tool, idx"))


def _use_earlier_indexes(db: sqlite3.Connection) -> None:
    for name, columns in EARLIER_INDEXES:
        db.execute(f"DROP INDEX {name}")
        db.execute(f"CREATE INDEX {name} ON receipts ({columns})")


def test_sqlite_search_indexes_do_not_repeat_the_index(tmp_path: Path) -> None:
    """Every entry of an index on a rowid table ends with the rowid, which is ``idx`` itself:
    naming ``idx`` as a column stored it twice (3-4 bytes per receipt and index)."""
    asyncio.run(_make_store(tmp_path))
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        columns = {name: [row[2] for row in db.execute(f"PRAGMA index_info({name})")]
                   for name, _ in EARLIER_INDEXES}
    assert columns == {"receipts_by_server": ["server"], "receipts_by_tool": ["tool"],
                       "receipts_by_server_tool": ["server", "tool"]}


@pytest.mark.parametrize("earlier", [False, True], ids=["current", "earlier"])
def test_sqlite_search_uses_an_index_for_every_combination(tmp_path: Path,
                                                           earlier: bool) -> None:
    asyncio.run(_make_store(tmp_path))
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        if earlier:
            _use_earlier_indexes(db)
        for where, index in (("r.server = 1", "receipts_by_server"),
                             ("r.tool = 1", "receipts_by_tool"),
                             ("r.server = 1 AND r.tool = 2", "receipts_by_server_tool")):
            plan = " ".join(str(row[-1]) for row in db.execute(
                "EXPLAIN QUERY PLAN SELECT r.idx FROM receipts r JOIN receipt_keys k "
                "ON k.id = r.kid JOIN receipt_ledgers l ON l.id = r.ledger WHERE "
                f"r.idx >= 0 AND r.idx < 9 AND {where} ORDER BY r.idx DESC LIMIT 5"))
            assert f"USING COVERING INDEX {index}" in plan or f"USING INDEX {index}" in plan, plan
            assert "TEMP B-TREE" not in plan, plan


async def test_sqlite_search_on_a_store_with_the_earlier_indexes(tmp_path: Path) -> None:
    """A store made with the earlier search indexes needs no migration: the same answers."""
    data = tmp_path / "d"
    async with headless_notary(data, "sqlite") as notary:
        answers = await asyncio.gather(*(issue(notary, n, server=f"s{n % 2}", tool=f"t{n % 3}")
                                         for n in range(30)))
    newest = sorted((r.without_proof() for r, _ in answers), key=lambda r: r.index,
                    reverse=True)
    with sqlite3.connect(Paths(data).db) as db:
        _use_earlier_indexes(db)
    async with headless_notary(data, "sqlite") as notary:
        for server, tool in ((None, None), ("s1", None), (None, "t2"), ("s0", "t1")):
            want = [r for r in newest if server in (None, r.server) and tool in (None, r.tool)]
            got = await notary.store.search_receipts(server=server, tool=tool, limit=100)
            assert got == want and want, (server, tool)
            page = await notary.store.search_receipts(server=server, tool=tool, limit=3,
                                                      before=(want[2].issued_at, want[2].index))
            assert page == want[3:6], (server, tool)


async def _make_store(tmp_path: Path) -> None:
    store = await SqliteNotaryStore.open(tmp_path / "s.sqlite", create=True)
    await store.close()


# --- accounts, API keys, receipt keys -----------------------------------------------------


async def open_bare(tmp_path: Path, backend: str) -> NotaryStore:
    if backend == "memory":
        return MemoryNotaryStore()
    if backend != "sqlite":
        return await open_store(backend, tmp_path / "unused.sqlite")
    return await SqliteNotaryStore.open(tmp_path / "s.sqlite", create=True)


async def test_api_keys_and_usage(tmp_path: Path, backend: str) -> None:
    store = await open_bare(tmp_path, backend)
    try:
        first = await admin.create_api_key(store, "alice", 10)
        second = await admin.create_api_key(store, "alice")  # keeps the allowance
        other = await admin.create_api_key(store, "bob")
        record = await store.api_key(first.key_id)
        assert record is not None
        assert (record.account, record.secret_sha256, record.revoked,
                record.monthly_allowance) == ("alice", first.secret_sha256, None, 10)
        assert (await store.api_key(second.key_id)).monthly_allowance == 10  # type: ignore[union-attr]
        assert await store.api_key("ffffffffffff") is None
        await admin.create_api_key(store, "alice", 10)  # the account's own allowance: fine
        # A new key never changes the allowance all the account's keys share.
        with pytest.raises(admin.AdminError, match="change it for every key") as refused:
            await admin.create_api_key(store, "alice", 3)
        assert refused.value.then == ("account set-allowance", "alice", "3")
        assert (await store.api_key(first.key_id)).monthly_allowance == 10  # type: ignore[union-attr]
        assert len([k for k in await store.list_api_keys("2026-01") if k.account == "alice"]) == 3
        await admin.set_monthly_allowance(store, "alice", 3)  # the explicit way, for all keys
        assert (await store.api_key(first.key_id)).monthly_allowance == 3  # type: ignore[union-attr]
        assert (await store.api_key(second.key_id)).monthly_allowance == 3  # type: ignore[union-attr]
        await admin.set_monthly_allowance(store, "alice", None)
        assert (await store.api_key(first.key_id)).monthly_allowance is None  # type: ignore[union-attr]
        with pytest.raises(admin.AdminError, match="no account"):
            await admin.set_monthly_allowance(store, "nobody", 3)
        with pytest.raises(admin.AdminError):
            await admin.set_monthly_allowance(store, "alice", -1)

        listing = await store.list_api_keys("2026-01")
        assert [k.key_id for k in listing][:3] == [first.key_id, second.key_id, other.key_id]
        assert len(listing) == 4
        assert {k.account for k in listing} == {"alice", "bob"}
        assert all(k.used_this_month == 0 and k.revoked is None for k in listing)
        assert await store.usage("alice", "2026-01") == 0

        assert await admin.revoke_api_key(store, first.token) == first.key_id
        with pytest.raises(admin.AdminError):
            await admin.revoke_api_key(store, first.key_id)  # already revoked
        with pytest.raises(admin.AdminError):
            await admin.create_api_key(store, "no spaces")
        assert (await store.api_key(first.key_id)).revoked is not None  # type: ignore[union-attr]
    finally:
        await store.close()


async def test_receipt_keys(tmp_path: Path, backend: str) -> None:
    store = await open_bare(tmp_path, backend)
    try:
        assert await store.receipt_keys() == []
        assert await store.add_receipt_key("kid-b", '{"b": 1}', 20.0)
        assert await store.add_receipt_key("kid-a", '{"a": 1}', 10.0)
        assert not await store.add_receipt_key("kid-a", '{"other": 1}', 30.0)
        assert [(k.kid, k.jwk) for k in await store.receipt_keys()] == [
            ("kid-a", '{"a": 1}'), ("kid-b", '{"b": 1}')]  # oldest first: the newest signs
    finally:
        await store.close()


async def test_a_rotated_key_signs_and_old_receipts_stay_valid(tmp_path: Path, backend: str
                                                              ) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        old, _ = await issue(notary, 1)
        await admin.rotate_receipt_key(notary.paths, notary.store)
        await notary.refresh_keys(force=True)
        new, _ = await issue(notary, 2)
        assert old.signature and new.signature and old.signature.kid != new.signature.kid
        for receipt in (old, new):
            stored = await notary.store.receipt_by_id(receipt.id)
            assert stored == receipt.without_proof()
            notary.jwks.verify(stored)


# --- two writers on one store -----------------------------------------------------------


async def test_a_digest_logged_by_another_process_is_not_logged_again(
        tmp_path: Path, shared: str) -> None:
    """B read "not logged yet" before A committed (the race window), then queued it: B's
    batch screen, under the lock, finds A's receipt and answers with it."""
    data = tmp_path / "d"
    async with headless_notary(data, shared) as a, headless_notary(data, shared) as b:
        mine, created = await issue(a, 7)
        assert created

        async def stale_read(call_sha256: str) -> None:
            return None  # what B's early lookup saw before A's commit

        b.store.receipt_by_digest = stale_read  # type: ignore[method-assign]
        theirs, created = await issue(b, 7)
        assert not created and theirs.without_proof() == mine.without_proof()
        with pytest.raises(DigestConflict):
            await issue(b, 7, tool="other")
        assert b.log is not None
        head = await b.log.head(0)
        assert head is not None and head.size == 1


async def test_a_receipt_another_process_just_logged_comes_with_a_proof(
        tmp_path: Path, shared: str) -> None:
    """B's head is a moment old when A logs a digest; B, asked for it, finds A's receipt and
    proves it to a checkpoint that covers it (it re-reads the head instead of failing)."""
    data = tmp_path / "d"
    async with headless_notary(data, shared) as a, headless_notary(data, shared) as b:
        assert b.log is not None
        await b.log.head(0)  # B's cached head: the empty log
        mine, _ = await issue(a, 9)
        b.log._head_read = time.monotonic()  # still fresh when B is asked
        theirs, created = await issue(b, 9)
        assert not created and theirs.without_proof() == mine.without_proof()
        assert theirs.proof is not None


async def test_an_allowance_spent_by_another_process_is_not_overspent(
        tmp_path: Path, shared: str) -> None:
    data = tmp_path / "d"
    async with headless_notary(data, shared) as a, headless_notary(data, shared) as b:
        await a.store.create_api_key("small", 1, "000000000001", b"\0" * 32)
        small = Account("small", 1)
        await issue(a, 1, small)

        async def stale_usage(account: str, month: str) -> int:
            return 0  # B's early check ran before A's write was committed

        b.store.usage = stale_usage  # type: ignore[method-assign]
        with pytest.raises(QuotaExceeded):
            await issue(b, 2, small)
        assert await a.store.receipt_by_digest(digest(2)) is None
        listing = await a.store.list_api_keys(
            (await a.store.receipt_by_digest(digest(1))).issued_at[:7])  # type: ignore[union-attr]
        assert [k.used_this_month for k in listing if k.account == "small"] == [1]


async def test_two_writers_under_load_keep_every_invariant(tmp_path: Path, shared: str) -> None:
    """Concurrent requests on two notaries of one file, with overlapping digests and a small
    allowance: each digest is logged once, every answer for it is the same receipt, and the
    account is charged exactly its allowance."""
    data = tmp_path / "d"
    allowance = 40
    async with headless_notary(data, shared) as a, headless_notary(data, shared) as b:
        await a.store.create_api_key("acct", allowance, "000000000001", b"\0" * 32)
        account = Account("acct", allowance)

        async def attempt(notary: Notary, n: int) -> Receipt | None:
            try:
                return (await issue(notary, n, account))[0]
            except QuotaExceeded:
                return None

        digests = [n % 60 for n in range(120)]  # each digest asked of both notaries
        answers = await asyncio.gather(*(attempt(a if i % 2 else b, n)
                                         for i, n in enumerate(digests)))
        got = [r for r in answers if r is not None]
        by_digest: dict[str, set[str]] = {}
        for r in got:
            by_digest.setdefault(r.call_sha256, set()).add(r.id)
        assert all(len(ids) == 1 for ids in by_digest.values())
        assert len(by_digest) == allowance  # 60 distinct digests, 40 fit
        assert a.log is not None
        head = await a.log.head(0)
        assert head is not None and head.size == allowance
        entries = await a.log.reader.entries(0, head.size)
        assert len({decode_entry(e).call_sha256 for e in entries}) == allowance
        month = got[0].issued_at[:7]
        assert await a.store.usage("acct", month) == allowance


# --- the SQLite layout ----------------------------------------------------------------------


async def test_sqlite_receipt_rows_hold_only_what_the_entry_does_not(tmp_path: Path) -> None:
    async with headless_notary(tmp_path / "d", "sqlite") as notary:
        receipt, _ = await issue(notary, 1, server="weather", tool="forecast")
    with sqlite3.connect(tmp_path / "d" / "notary.store.sqlite") as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        row = db.execute("SELECT * FROM receipts").fetchone()
        columns = [d[0] for d in db.execute("SELECT * FROM receipts").description]
    assert columns == ["idx", "sig", "kid", "ledger", "account", "server", "tool"]
    assert row[0] == receipt.index and len(row[1]) == 64
    assert all(isinstance(v, int) for v in row[2:])
    flat = repr(row).encode()
    for value in (receipt.id, receipt.call_sha256, "weather", "forecast", receipt.issued_at):
        assert value.encode() not in flat


def test_bundle_entry_finds_one_entry() -> None:
    entries = [os.urandom(n) for n in (0, 1, 300, 5, 65535)]
    bundle = b"".join(encode_bundle_entry(e) for e in entries)
    assert [bundle_entry(bundle, i) for i in range(len(entries))] == entries
    for bad in (len(entries), -1, 256):
        with pytest.raises(ValueError):
            bundle_entry(bundle, bad)
    with pytest.raises(ValueError):
        bundle_entry(bundle[:-1], len(entries) - 1)


async def test_digests_aimed_at_one_prefix_do_not_share_a_lookup_key(tmp_path: Path) -> None:
    """A client chooses its digests: ones with a common prefix must not pile onto one key of
    the 8-byte lookup index (each lookup would then rebuild every one of them)."""
    async with headless_notary(tmp_path / "d", "sqlite") as notary:
        digests = ["00" * 24 + f"{n:016x}" for n in range(64)]
        await asyncio.gather(*(notary.notarize(UNLIMITED, "srv", "t", d) for d in digests))
        for d in digests:
            stored = await notary.store.receipt_by_digest(d)
            assert stored is not None and stored.call_sha256 == d
    with sqlite3.connect(tmp_path / "d" / "notary.store.sqlite") as db:
        keys = {k for (k,) in db.execute("SELECT k FROM receipt_digests UNION ALL "
                                         "SELECT digest_k FROM receipt_keys_recent")}
    assert len(keys) == len(digests)


async def test_witness_state(tmp_path: Path, backend: str) -> None:
    store = await open_bare(tmp_path, backend)
    try:
        assert await store.witness_state() is None
        await store.save_witness_state(WitnessState({"w1": 5, "w2": 3}, b"note\n"))
        assert await store.witness_state() == WitnessState({"w1": 5, "w2": 3}, b"note\n")
        await store.save_witness_state(WitnessState({"w2": 9}))  # replaces, not merges
        assert await store.witness_state() == WitnessState({"w2": 9}, None)
    finally:
        await store.close()


# --- the issue path's reads ----------------------------------------------------------------


async def test_a_new_digest_costs_no_receipt_read(tmp_path: Path, backend: str) -> None:
    """Duplicates are decided by the batch screen under the lock: issuing reads no receipt
    of its own, and a repeated digest still gets its first receipt back, uncounted."""
    async with headless_notary(tmp_path / "d", backend) as notary:
        async def no_read(call_sha256: str) -> None:
            raise AssertionError("the issue path read a receipt by digest")

        notary.store.receipt_by_digest = no_read  # type: ignore[method-assign]
        first, created = await issue(notary, 1)
        again, created_again = await issue(notary, 1)
        assert created and not created_again
        assert again.without_proof() == first.without_proof() and again.proof is not None
        with pytest.raises(DigestConflict):
            await issue(notary, 1, tool="other")


async def test_a_known_digest_is_answered_when_the_allowance_is_spent(
        tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        await notary.store.create_api_key("small", 1, "000000000001", b"\0" * 32)
        small = Account("small", 1)
        first, _ = await issue(notary, 1, small)
        again, created = await issue(notary, 1, small)
        assert not created and again.without_proof() == first.without_proof()
        with pytest.raises(QuotaExceeded):
            await issue(notary, 2, small)


async def test_a_known_digest_is_answered_when_writes_are_stopped(
        tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        first, _ = await issue(notary, 1)
        assert notary.log is not None and notary.log.sequencer is not None
        notary.log.sequencer.halt("test: damage found")
        again, created = await issue(notary, 1)
        assert not created and again.without_proof() == first.without_proof()
        with pytest.raises(StoreCorrupt):
            await issue(notary, 2)


def test_id_key_is_the_first_four_bytes_of_a_receipt_id() -> None:
    for _ in range(200):
        rid = new_receipt_id()
        assert id_key(rid) == int.from_bytes(b64url_decode(rid[3:])[:4], "big", signed=True)
    for bad in ("tc_short", "tc_AAECAwQFBgcICQoLDA0ODx", "xx_AAECAwQFBgcICQoLDA0ODw", ""):
        with pytest.raises(ValueError):
            id_key(bad)


# --- the ids a receipt row refers to ---------------------------------------------------------


async def test_a_batch_of_known_names_takes_its_ids_from_the_cache(
        tmp_path: Path, shared: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a batch has resolved a server's, a tool's, a key's and an account's ids, later
    batches of the same names take them from the cache of committed ids as it is, with no
    merged copy of it (``refs_for``) and no trip; a new name is resolved again."""
    from notary.store import postgres as pg_store
    from notary.store import sqlite as sqlite_store

    merged: list[int] = []
    for module in (sqlite_store, pg_store):
        real = module.refs_for

        def counted(*args: object, real: object = real) -> object:
            merged.append(1)
            return real(*args)  # type: ignore[operator]

        monkeypatch.setattr(module, "refs_for", counted)
    async with headless_notary(tmp_path / "n", shared) as notary:
        await issue(notary, 1)
        assert len(merged) == 1  # the first batch: the names are new to the store
        for n in range(2, 6):
            await issue(notary, n)
        assert len(merged) == 1
        receipt, _ = await issue(notary, 6, server="another")
        assert len(merged) == 2 and receipt.server == "another"
        assert (await notary.store.receipt_by_digest(digest(6))) == receipt.without_proof()
