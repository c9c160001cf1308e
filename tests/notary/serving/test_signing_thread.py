"""Where the commit signs its receipts: a large batch on a worker thread, so the event loop
serves the next requests meanwhile (libsodium signs without the GIL); a small one on the
loop, whose lone request would wait longer for a hand-off than for its signature; on
PostgreSQL every batch on the loop, which drives the commit while it holds the log's lock."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from notary.core.entry import LogEntry
from notary.core.receipts import Receipt, ReceiptKey
from notary.serving.service import SIGN_OFF_LOOP
from tests.notary_server import app_notary


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
async def test_a_large_batch_is_signed_off_the_loop_on_sqlite_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database: str,
        request: pytest.FixtureRequest) -> None:
    settings = {"database": request.getfixturevalue("pg_url")} if database == "postgres" \
        else {}
    signed: list[tuple[int, int]] = []  # (receipts, thread)
    real = ReceiptKey.sign_entries

    def recorded(self: ReceiptKey, entries: Sequence[tuple[int, LogEntry]], **ledger: str
                 ) -> list[Receipt]:
        out = real(self, entries, **ledger)
        signed.append((len(out), threading.get_ident()))
        return out

    monkeypatch.setattr(ReceiptKey, "sign_entries", recorded)
    loop_thread = threading.get_ident()
    async with app_notary(tmp_path / "n", **settings) as served:
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
            on_loop = size < SIGN_OFF_LOOP or database == "postgres"
            assert (thread == loop_thread) == on_loop, signed
        # Signed off the loop or on it, every receipt is stored as answered, and verifies.
        for receipt in [lone, *(r for r, _ in many)]:
            stored = await notary.stored(receipt.id)
            assert stored.signature == receipt.signature
            notary.jwks.verify(receipt)  # raises if the signature does not verify
