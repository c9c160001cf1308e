"""The PostgreSQL write statement's receipt columns (``notary.store.postgres_rows``): built in
one pass for speed, they must be exactly the per-receipt values the lookups search by
(``id_key``, ``digest_key``, ``position``, the entry URL's prefix), or a stored receipt could no
longer be found by its id or digest; and the SQLite key rows (``key_rows``), which take the
screen's digest keys the same way."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from ledger.storage.base import StoreError
from notary.core.entry import LogEntry
from notary.core.ids import RECEIPT_ID_PREFIX, b64url_encode, new_receipt_id
from notary.core.logs import position
from notary.core.receipts import Receipt, ReceiptKey
from notary.store.postgres_rows import id_keys, receipt_columns
from notary.store.sqlite_schema import Refs, digest_key, id_key, key_rows, split_entry_url

SALT = b"0123456789abcdef"
ORIGIN = "notary.example/log"
URL = "https://notary.example/v1/ledger/entries/"


def test_id_keys_are_the_lookup_keys_of_the_ids() -> None:
    ids = [new_receipt_id() for _ in range(200)] + [
        RECEIPT_ID_PREFIX + b64url_encode(bytes([b]) * 16) for b in (0, 0x80, 0xFF)]
    assert id_keys(ids) == [id_key(i) for i in ids]
    assert id_keys([]) == []


@pytest.mark.parametrize("bad", ["tc_AAAA", "tc_AAAA*AAAAAAAAAAAAAAAAA",
                                 "tc_AAAAAAA=AAAAAAAAAAAAAA"])
def test_an_id_the_notary_does_not_make_is_refused(bad: str) -> None:
    with pytest.raises(StoreError):
        id_keys([new_receipt_id(), bad])


def _receipts(n: int, index: int = 7) -> list[tuple[Receipt, str]]:
    key = ReceiptKey.generate()
    out = []
    for i in range(n):
        entry = LogEntry.fresh(f"server-{i % 3}", "tool", os.urandom(32), datetime.now(UTC))
        receipt = Receipt.for_entry(entry, origin=ORIGIN, index=index + i,
                                    entry_url=f"{URL}{index + i}")
        out.append((key.sign_receipt(receipt), f"account-{i % 2}"))
    return out


def _refs(receipts: list[tuple[Receipt, str]]) -> Refs:
    r = receipts[0][0]
    assert r.signature is not None
    return Refs({r.signature.kid: 5}, {(ORIGIN, URL): 6},
                {"server-0": 10, "server-1": 11, "server-2": 12, "tool": 13},
                {"account-0": 20, "account-1": 21})


def test_columns_are_each_receipts_row() -> None:
    receipts = _receipts(9)
    refs = _refs(receipts)
    screened = {receipts[0][0].call_sha256: digest_key(receipts[0][0].call_sha256, SALT)}
    cols = receipt_columns(receipts, refs, 3, SALT, screened)
    rows = [tuple(c[i] for c in cols) for i in range(len(receipts))]
    assert rows == [
        (position(3, r.index), r.signature.raw, 5, refs.ledgers[(ORIGIN, split_entry_url(r))],
         refs.accounts[account], refs.names[r.server], 13, id_key(r.id),
         digest_key(r.call_sha256, SALT))
        for r, account in receipts if r.signature is not None]


def test_a_wrong_screened_key_is_not_recomputed() -> None:
    """The screen's keys are used as given (they were computed with the same salt)."""
    receipts = _receipts(1)
    cols = receipt_columns(receipts, _refs(receipts), 0, SALT, {receipts[0][0].call_sha256: 42})
    assert cols[8] == [42]


def test_sqlite_key_rows_take_the_screens_keys_and_compute_the_others() -> None:
    receipts = [r for r, _ in _receipts(5)]
    screened = {receipts[1].call_sha256: digest_key(receipts[1].call_sha256, SALT),
                receipts[3].call_sha256: 42}
    assert key_rows(receipts, SALT, 2, screened) == [
        (position(2, r.index), id_key(r.id),
         42 if i == 3 else digest_key(r.call_sha256, SALT)) for i, r in enumerate(receipts)]


def test_a_name_without_an_id_is_a_key_error() -> None:
    receipts = _receipts(2)
    refs = _refs(receipts)
    del refs.names["server-1"]
    with pytest.raises(KeyError):
        receipt_columns(receipts, refs, 0, SALT, {})


def test_an_entry_url_not_ending_in_the_index_is_refused() -> None:
    (receipt, account), = _receipts(1)
    moved = Receipt.for_entry(receipt.entry(), origin=ORIGIN, index=receipt.index,
                              entry_url=f"{URL}{receipt.index + 1}")
    signed = [(ReceiptKey.generate().sign_receipt(moved), account)]
    with pytest.raises(StoreError):
        receipt_columns(signed, _refs(signed), 0, SALT, {})


def test_an_index_beyond_a_position_is_refused() -> None:
    receipts = _receipts(1, index=1 << 40)
    with pytest.raises(ValueError):
        receipt_columns(receipts, _refs(receipts), 0, SALT, {})
