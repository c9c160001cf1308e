"""Where the commit signs its receipts: a large batch on a worker thread, so the event loop
serves the next requests meanwhile (libsodium signs without the GIL); a small one on the
loop, whose lone request would wait longer for a hand-off than for its signature. On
PostgreSQL a large batch is signed on a worker thread while its screen's round trip is in
flight (notary/serving/sign_ahead.py), and what the screen changed is signed again."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from notary.core.entry import LogEntry
from notary.core.ids import format_issued_at
from notary.core.receipts import Receipt, ReceiptKey
from notary.serving.clock_guard import utc_now
from notary.serving.service import SIGN_OFF_LOOP
from notary.store.postgres import PgNotaryWriteTx
from tests.notary_server import app_notary


def _digest(n: int) -> str:
    return hashlib.sha256(f"call {n}".encode()).hexdigest()


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int, float]]:
    """("sign", receipts, thread, when it began) of every signing, and ("screened", 0, 0,
    when) of every PostgreSQL screen's answer, in order."""
    events: list[tuple[str, int, int, float]] = []
    real = ReceiptKey.sign_entries
    screen = PgNotaryWriteTx.screen

    def recorded(self: ReceiptKey, entries: Sequence[tuple[int, LogEntry]], **ledger: str
                 ) -> list[Receipt]:
        began = time.perf_counter()
        out = real(self, entries, **ledger)
        events.append(("sign", len(out), threading.get_ident(), began))
        return out

    async def screened(self: PgNotaryWriteTx, *args: Any, **kw: Any) -> Any:
        out = await screen(self, *args, **kw)
        events.append(("screened", 0, 0, time.perf_counter()))
        return out

    monkeypatch.setattr(ReceiptKey, "sign_entries", recorded)
    monkeypatch.setattr(PgNotaryWriteTx, "screen", screened)
    return events


async def test_a_large_batch_is_signed_off_the_loop(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    signed: list[tuple[int, int]] = []  # (receipts, thread)
    real = ReceiptKey.sign_entries

    def recorded(self: ReceiptKey, entries: Sequence[tuple[int, LogEntry]], **ledger: str
                 ) -> list[Receipt]:
        out = real(self, entries, **ledger)
        signed.append((len(out), threading.get_ident()))
        return out

    monkeypatch.setattr(ReceiptKey, "sign_entries", recorded)
    loop_thread = threading.get_ident()
    async with app_notary(tmp_path / "n") as served:
        notary = served.notary
        token = await served.new_api_key("signing-thread")
        account = await notary.authenticate(f"Bearer {token}")

        def digest(n: int) -> str:
            return hashlib.sha256(f"call {n}".encode()).hexdigest()

        lone, created = await notary.notarize(account, "srv", "t", digest(0))
        assert created
        many = await asyncio.gather(*(notary.notarize(account, "srv", "t", digest(n))
                                      for n in range(1, 4 * SIGN_OFF_LOOP)))
        assert signed[0] == (1, loop_thread)
        assert any(size >= SIGN_OFF_LOOP for size, _ in signed[1:])
        for size, thread in signed[1:]:
            assert (thread == loop_thread) == (size < SIGN_OFF_LOOP), signed
        # Signed off the loop or on it, every receipt is stored as answered, and verifies.
        for receipt in [lone, *(r for r, _ in many)]:
            stored = await notary.stored(receipt.id)
            assert stored.signature == receipt.signature
            notary.jwks.verify(receipt)  # raises if the signature does not verify


async def test_on_postgres_a_large_batch_is_signed_during_its_screen(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _recording(monkeypatch)
    loop_thread = threading.get_ident()
    async with app_notary(tmp_path / "n", database=pg_url) as served:
        notary = served.notary
        token = await served.new_api_key("signing-ahead")
        account = await notary.authenticate(f"Bearer {token}")
        lone, _ = await notary.notarize(account, "srv", "t", _digest(0))
        many = await asyncio.gather(*(notary.notarize(account, "srv", "t", _digest(n))
                                      for n in range(1, 4 * SIGN_OFF_LOOP)))
        signs = [e for e in events if e[0] == "sign"]
        assert signs[0][1:3] == (1, loop_thread)
        assert any(size >= SIGN_OFF_LOOP for _, size, _, _ in signs[1:])
        for n, (kind, size, thread, began) in enumerate(events):
            if kind != "sign":
                continue
            # A large batch: on a worker thread, begun before its screen answered (the next
            # event of the transaction), and nothing signed again after it; a small one after.
            assert (thread == loop_thread) == (size < SIGN_OFF_LOOP), events
            if size >= SIGN_OFF_LOOP:
                assert events[n + 1][0] == "screened" and began < events[n + 1][3], events
        for receipt in [lone, *(r for r, _ in many)]:
            stored = await notary.stored(receipt.id)
            assert stored.signature == receipt.signature
            notary.jwks.verify(stored)


async def test_on_postgres_what_the_screen_changed_is_signed_again(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another frontend logged a later ``issued_at`` than the batch's: the screen gives each
    entry that time (a new entry), so what was signed ahead is not used; every receipt is
    signed again on the loop, for its entry as logged, and verifies as stored."""
    events = _recording(monkeypatch)
    loop_thread = threading.get_ident()
    async with app_notary(tmp_path / "n", database=pg_url) as served:
        notary = served.notary
        token = await served.new_api_key("signing-again")
        account = await notary.authenticate(f"Bearer {token}")
        assert (await notary.notarize(account, "srv", "t", _digest(0)))[1]
        later = format_issued_at(utc_now() + timedelta(seconds=2))
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute("UPDATE notary_state SET last_issued_at = $1", later)
        finally:
            await conn.close()
        events.clear()
        many = await asyncio.gather(*(notary.notarize(account, "srv", "t", _digest(n))
                                      for n in range(1, 2 * SIGN_OFF_LOOP + 1)))
        signs = [e for e in events if e[0] == "sign"]
        ahead = [e for e in signs if e[2] != loop_thread]
        assert ahead and all(size >= SIGN_OFF_LOOP for _, size, _, _ in ahead), events
        # Everything signed ahead was signed again, on the loop, after its screen.
        assert sum(size for _, size, thread, _ in signs if thread == loop_thread) == len(many)
        for receipt, _ in many:
            assert receipt.issued_at == later
            stored = await notary.stored(receipt.id)
            assert stored.signature == receipt.signature and stored.issued_at == later
            notary.jwks.verify(stored)
