"""Server names belong to accounts, and a digest to the account that logged it (docs/design.md:
"Names belong to accounts", "One digest, one receipt"), on every backend, through the real write
path.

The first account to notarize under a name holds it, decided in the log's write transaction:
another account is refused that name and every name confusable with it (UTS #39 skeleton),
nothing is logged or counted for the refusal, and two notaries on one SQLite file or one
PostgreSQL database (two processes, as far as the store can tell) racing for a free name never
both win. A digest logged under one account is never answered to another as its receipt.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import asyncpg
import pytest

from ledger.storage.base import StoreError
from notary.core.receipts import Receipt
from notary.core.server_names import name_skeleton
from notary.operator import admin
from notary.serving.refusals import DigestTaken, ServerNotAllowed
from notary.serving.service import Account, Notary
from notary.store.base import SkeletonsOutdated, new_claims
from notary.store.sqlite import SqliteNotaryStore
from tests.notary_server import digest, headless_notary, issue

ALICE = Account("alice", None)
BOB = Account("bob", None)
CYRILLIC_WEATHER = "w\u0435ather"  # е: CYRILLIC SMALL LETTER IE


async def _accounts(notary: Notary, *names: str) -> None:
    for name in names:
        if not any(k.account == name for k in await notary.store.list_api_keys("2026-01")):
            await admin.create_api_key(notary.store, name)


async def _size(notary: Notary) -> int:
    assert notary.log is not None
    head = await notary.log.head(0)
    return 0 if head is None else head.size


def test_look_alike_names_share_a_skeleton() -> None:
    assert name_skeleton(CYRILLIC_WEATHER) == name_skeleton("weather")
    assert name_skeleton("Weather") == name_skeleton("WEATHER") == name_skeleton("weather")
    assert name_skeleton("\uff57eather") == name_skeleton("weather")  # full-width w
    assert name_skeleton("wea\u200bther") == name_skeleton("weather")  # zero-width space
    assert name_skeleton("paypaI") == name_skeleton("paypal")  # capital I, small l
    assert name_skeleton("weather") != name_skeleton("whether")


async def test_the_first_account_holds_a_name_and_its_look_alikes(
        tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        await _accounts(notary, "bob")
        mine, created = await issue(notary, 1, ALICE, server="weather")
        assert created
        for n, name in enumerate(["weather", CYRILLIC_WEATHER, "Weather", "\uff57eather"]):
            with pytest.raises(ServerNotAllowed) as refused:
                await issue(notary, 100 + n, BOB, server=name)
            assert (refused.value.status, refused.value.code) == (403, "server_not_allowed")
            assert "alice" not in str(refused.value)  # the holder is never named
        # Nothing was logged or counted for the refusals.
        assert await _size(notary) == 1
        assert await notary.store.usage("bob", mine.issued_at[:7]) == 0
        for n in range(4):
            assert await notary.store.receipt_by_digest(digest(100 + n)) is None
        # Every key of the holding account keeps working, on the name and on its look-alikes.
        key = await admin.create_api_key(notary.store, "alice")
        second_key = Account("alice", None, key_id=key.key_id)
        assert (await issue(notary, 2, second_key, server="weather"))[1]
        assert (await issue(notary, 3, ALICE, server=CYRILLIC_WEATHER))[1]
        # Other accounts still claim free names.
        assert (await issue(notary, 4, BOB, server="forecast"))[1]
        with pytest.raises(ServerNotAllowed):
            await issue(notary, 5, ALICE, server="forecast")
        held = {(r.name, r.account) for r in await notary.store.server_names()}
        assert held == {("weather", "alice"), (CYRILLIC_WEATHER, "alice"), ("forecast", "bob")}
        assert [r.name for r in await notary.store.server_names("bob")] == ["forecast"]


async def test_one_batch_with_two_accounts_on_a_free_name_has_one_winner(
        tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        await _accounts(notary, "bob")
        answers = await asyncio.gather(
            *(issue(notary, n, ALICE if n % 2 else BOB,
                    server="fresh" if n % 3 else "Fresh") for n in range(40)),
            return_exceptions=True)
        await _check_one_winner(notary, answers, lambda n: ALICE if n % 2 else BOB)


async def _check_one_winner(notary: Notary, answers: list[object],
                            account_of: object) -> None:
    issued = [a for a in answers if isinstance(a, tuple)]
    refused = [a for a in answers if isinstance(a, BaseException)]
    assert all(isinstance(e, ServerNotAllowed) for e in refused), refused
    assert issued and refused
    holders = {r.account for r in await notary.store.server_names()}
    assert len(holders) == 1
    winner = holders.pop()
    assert len(issued) == 20 and len(refused) == 20  # every request of the winner, none else
    receipts: list[Receipt] = [r for r, _ in issued]  # type: ignore[misc]
    for receipt in receipts:
        assert await notary.store.digest_account(receipt.call_sha256) == winner
    assert await _size(notary) == 20


async def test_two_processes_racing_for_a_free_name_never_both_win(
        tmp_path: Path, shared: str) -> None:
    """Alice asks one notary, Bob the other, at the same time, for the same free name (and a
    look-alike): the first commit under the log's lock claims it; the other process's screen,
    under the same lock, sees the claim and refuses."""
    data = tmp_path / "d"
    async with headless_notary(data, shared) as a, headless_notary(data, shared) as b:
        await _accounts(a, "bob")
        answers = await asyncio.gather(
            *(issue(a if n % 2 else b, n, ALICE if n % 2 else BOB,
                    server="race" if n % 4 < 2 else "r\u0430ce") for n in range(40)),
            return_exceptions=True)
        await _check_one_winner(a, answers, None)
        assert await b.store.server_names() == await a.store.server_names()


async def test_the_operator_grants_lists_and_moves_names(tmp_path: Path, backend: str) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        store = notary.store
        await _accounts(notary, "bob")
        assert await admin.grant_server_name(store, "news", "bob")
        assert not await admin.grant_server_name(store, "news", "bob")  # already
        with pytest.raises(ServerNotAllowed):
            await issue(notary, 1, ALICE, server="news")  # granted before any receipt
        with pytest.raises(admin.AdminError, match="move"):
            await admin.grant_server_name(store, "NEWS", "alice")  # a look-alike
        with pytest.raises(admin.AdminError, match="mixes scripts"):
            await admin.grant_server_name(store, "n\u0435ws", "alice")  # Cyrillic е
        with pytest.raises(admin.AdminError):
            await admin.grant_server_name(store, "bad\nname", "alice")
        with pytest.raises(Exception, match="does not exist"):
            await admin.grant_server_name(store, "other", "nobody")
        assert (await issue(notary, 2, BOB, server="news"))[1]

        assert await admin.move_server_name(store, "news", "alice") == "bob"
        assert (await issue(notary, 3, ALICE, server="news"))[1]
        with pytest.raises(ServerNotAllowed):
            await issue(notary, 4, BOB, server="news")
        with pytest.raises(Exception, match="no account holds"):
            await admin.move_server_name(store, "unheld", "alice")
        assert [(r.name, r.account) for r in await store.server_names()] == [("news", "alice")]


# --- a digest belongs to the account that logged it -------------------------------------


async def test_a_digest_logged_by_another_account_is_refused(tmp_path: Path, backend: str
                                                            ) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        await _accounts(notary, "bob")
        await issue(notary, 7, ALICE, server="srv")
        for server in ("srv", "bobs"):
            with pytest.raises(DigestTaken) as refused:
                await issue(notary, 7, BOB, server=server)
            assert (refused.value.status, refused.value.code) == (409, "digest_taken")
        # The owner still gets its receipt back, uncounted.
        again, created = await issue(notary, 7, ALICE, server="srv")
        assert not created and again.call_sha256 == digest(7)
        assert await _size(notary) == 1


async def test_a_digest_in_flight_for_another_account_is_refused(tmp_path: Path, backend: str
                                                                ) -> None:
    async with headless_notary(tmp_path / "d", backend) as notary:
        await _accounts(notary, "bob")
        await issue(notary, 1, BOB, server="bobs")  # bob holds a name of his own
        answers = await asyncio.gather(issue(notary, 9, ALICE, server="srv"),
                                       issue(notary, 9, BOB, server="bobs"),
                                       return_exceptions=True)
        assert isinstance(answers[0], tuple) and isinstance(answers[1], DigestTaken)


async def test_a_digest_another_process_logged_for_another_account_is_refused(
        tmp_path: Path, shared: str) -> None:
    """B's early read missed A's commit; B's batch screen, under the lock, finds the digest
    logged under Alice and refuses Bob instead of answering with Alice's receipt."""
    data = tmp_path / "d"
    async with headless_notary(data, shared) as a, headless_notary(data, shared) as b:
        await _accounts(a, "bob")
        await issue(a, 5, ALICE, server="srv")

        async def stale_read(call_sha256: str) -> None:
            return None

        b.store.receipt_by_digest = stale_read  # type: ignore[method-assign]
        with pytest.raises(DigestTaken):
            await issue(b, 5, BOB, server="bobs")
        assert await _size(b) == 1


# --- stores from before names were held ---------------------------------------------------


async def test_a_version_2_sqlite_store_gives_each_name_to_its_first_account(
        tmp_path: Path) -> None:
    data = tmp_path / "d"
    async with headless_notary(data, "sqlite") as notary:
        await _accounts(notary, "bob")
        await issue(notary, 1, ALICE, server="weather")
        await issue(notary, 2, BOB, server="forecast")
        await admin.move_server_name(notary.store, "weather", "bob")
        await issue(notary, 3, BOB, server="weather")  # as any account could before
    db = data / "notary.store.sqlite"
    with sqlite3.connect(db) as conn:  # back to the layout before names were held
        conn.execute("DROP TABLE server_names")
        conn.execute("PRAGMA user_version = 2")
    store = await SqliteNotaryStore.open(db)
    try:
        assert store.migration is not None and store.migration.from_version == 2
        assert [(r.name, r.account) for r in await store.server_names()] == [
            ("forecast", "bob"), ("weather", "alice")]
    finally:
        await store.close()
    async with headless_notary(data, "sqlite") as notary:  # and it serves on
        with pytest.raises(ServerNotAllowed):
            await issue(notary, 4, BOB, server=CYRILLIC_WEATHER)
        assert (await issue(notary, 5, ALICE, server="weather"))[1]


async def test_a_postgres_store_from_before_names_were_held_is_migrated(
        tmp_path: Path, pg_url: str) -> None:
    data = tmp_path / "d"
    async with headless_notary(data, pg_url) as notary:
        await _accounts(notary, "bob")
        await issue(notary, 1, ALICE, server="weather")
        await admin.move_server_name(notary.store, "weather", "bob")
        await issue(notary, 2, BOB, server="weather")
    conn = await asyncpg.connect(pg_url)
    try:  # back to notary schema version 2
        await conn.execute("DROP TABLE notary_server_names, notary_skeleton_version")
        await conn.execute("UPDATE schema_versions SET version = 2 WHERE component = 'notary'")
    finally:
        await conn.close()
    async with headless_notary(data, pg_url) as notary:
        assert [(r.name, r.account) for r in await notary.store.server_names()] == [
            ("weather", "alice")]
        with pytest.raises(ServerNotAllowed):
            await issue(notary, 3, BOB, server=CYRILLIC_WEATHER)  # the skeleton was filled
        assert (await issue(notary, 4, ALICE, server="weather"))[1]


async def test_a_refusal_is_never_handed_to_another_accounts_request(
        tmp_path: Path, backend: str) -> None:
    """Bob (refused ``weather``, which Alice holds) and Alice post one fresh digest together,
    round after round, in either order: Bob's refusal is his own, Alice's receipt is issued."""
    async with headless_notary(tmp_path / "d", backend) as notary:
        await _accounts(notary, "bob")
        await issue(notary, 0, ALICE, server="weather")
        for n in range(1, 21):
            first, second = (BOB, ALICE) if n % 2 else (ALICE, BOB)
            answers = dict(zip((first.name, second.name), await asyncio.gather(
                issue(notary, n, first, server="weather"),
                issue(notary, n, second, server="weather"), return_exceptions=True),
                strict=True))
            assert isinstance(answers["alice"], tuple), (n, answers)
            receipt, created = answers["alice"]
            assert created and receipt.call_sha256 == digest(n)
            assert isinstance(answers["bob"], ServerNotAllowed | DigestTaken), (n, answers)
        assert await _size(notary) == 21


# --- holds do not depend on the stored skeletons ------------------------------------------


async def _execute(data: Path, shared: str, *statements: str) -> None:
    """Run SQL on the store of a closed notary (a SQLite file or a PostgreSQL database)."""
    if shared == "sqlite":
        with sqlite3.connect(data / "notary.store.sqlite") as conn:
            for statement in statements:
                conn.execute(statement)
        return
    conn = await asyncpg.connect(shared)
    try:
        for statement in statements:
            await conn.execute(statement.replace("server_names", "notary_server_names")
                               .replace("skeleton_version", "notary_skeleton_version"))
    finally:
        await conn.close()


async def _stored_skeleton(notary: Notary, name: str) -> str:
    store = notary.store
    if isinstance(store, SqliteNotaryStore):
        return str(store._point.execute("SELECT skeleton FROM server_names WHERE name = ?",
                                        (name,)).fetchone()[0])
    return str(await store._retrying(lambda conn: conn.fetchval(  # type: ignore[attr-defined]
        "SELECT skeleton FROM notary_server_names WHERE name = $1", name)))


async def test_a_held_name_stays_its_holders_whatever_skeleton_is_stored(
        tmp_path: Path, shared: str) -> None:
    """The stored skeleton of Alice's ``weather`` is not what this process computes (the
    confusables data changed under it): Bob is still refused the exact name, and Alice keeps
    getting receipts under it."""
    data = tmp_path / "d"
    async with headless_notary(data, shared) as notary:
        await _accounts(notary, "bob")
        await issue(notary, 1, ALICE, server="weather")
    await _execute(data, shared, "UPDATE server_names SET skeleton = 'w-e-a-t-h-e-r'")
    async with headless_notary(data, shared) as notary:
        with pytest.raises(ServerNotAllowed):
            await issue(notary, 2, BOB, server="weather")
        assert (await issue(notary, 3, ALICE, server="weather"))[1]
        assert [(r.name, r.account) for r in await notary.store.server_names()] == [
            ("weather", "alice")]
        assert await _size(notary) == 2


async def test_skeletons_are_recomputed_when_the_librarys_data_change(
        tmp_path: Path, shared: str) -> None:
    """A store whose skeletons were computed with other data (another ICU) gets them
    recomputed at open, so look-alikes are judged by this process's data; a process that
    opened it before, with other data, refuses names with a clear error rather than judge
    look-alikes by a table it did not compute."""
    data = tmp_path / "d"
    async with headless_notary(data, shared) as notary:
        await _accounts(notary, "bob")
        await issue(notary, 1, ALICE, server="weather")
    await _execute(data, shared, "UPDATE server_names SET skeleton = 'w-e-a-t-h-e-r'",
                   "UPDATE skeleton_version SET version = 'icu-0'")
    async with headless_notary(data, shared) as notary:
        assert await _stored_skeleton(notary, "weather") == name_skeleton("weather")
        with pytest.raises(ServerNotAllowed):
            await issue(notary, 2, BOB, server="WEATHER")  # a look-alike, found again
        # Another process recomputes them with other data while this one runs.
        await _execute(data, shared, "UPDATE skeleton_version SET version = 'icu-0'")
        with pytest.raises(SkeletonsOutdated, match="skeletons were computed with 'icu-0'"):
            await issue(notary, 3, ALICE, server="weather")
        assert await _size(notary) == 1


def test_a_receipt_under_another_accounts_name_is_never_stored_silently() -> None:
    """The claims a batch makes: the first receipt under a free name; one under a name another
    account holds is an error, not an ignored claim."""
    def receipt(server: str) -> Receipt:
        return Receipt(id="tc_x", server=server, tool="t", call_sha256="0" * 64,
                       issued_at="2026-01-01T00:00:00.000Z", origin="o", index=0, entry_url="u")

    held = {"weather": "alice"}
    assert new_claims([(receipt("weather"), "alice"), (receipt("news"), "bob"),
                       (receipt("news"), "bob")], held) == [("news", "bob")]
    assert held == {"weather": "alice", "news": "bob"}
    with pytest.raises(StoreError, match="another account holds"):
        new_claims([(receipt("weather"), "bob")], held)
