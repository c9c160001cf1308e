"""Log entries (deterministic CBOR) and the ids and timestamps they carry."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.tiles import MAX_ENTRY_SIZE
from notary.core.entry import EntryError, LogEntry, decode_entry
from notary.core.ids import (
    b64url_decode,
    b64url_encode,
    format_issued_at,
    is_receipt_id,
    new_receipt_id,
    now_issued_at,
    parse_issued_at,
)
from notary.core.records import MAX_NAME_CHARS, SPEC

ID = "tc_AAECAwQFBgcICQoLDA0ODw"  # base64url of bytes 0..15
ISSUED_AT = "2026-11-29T20:49:44.123Z"
DIGEST = bytes(range(0xA0, 0xC0))

ENTRY = LogEntry(
    id=ID, server="weather", tool="get_forecast", call_sha256=DIGEST, issued_at=ISSUED_AT
)

# Hand-assembled RFC 8949 §4.2.1 encoding: a map of 6 pairs whose keys are ordered by
# their encoded bytes, which for text keys means shorter first, then bytewise:
# "id" (0x62) < "spec" (0x64 73..) < "tool" (0x64 74..) < "server" (0x66) <
# "issued_at" (0x69) < "call_sha256" (0x6b).
EXPECTED = b"".join(
    [
        b"\xa6",  # map(6)
        b"\x62id",
        b"\x78\x19" + ID.encode(),  # text(25): one extra length byte above 23
        b"\x64spec",
        b"\x6ers-tool-call/1",  # text(14)
        b"\x64tool",
        b"\x6cget_forecast",  # text(12)
        b"\x66server",
        b"\x67weather",  # text(7)
        b"\x69issued_at",
        b"\x78\x18" + ISSUED_AT.encode(),  # text(24)
        b"\x6bcall_sha256",
        b"\x58\x20" + DIGEST,  # bytes(32)
    ]
)


def test_exact_bytes_of_a_fixed_entry() -> None:
    assert ENTRY.encode() == EXPECTED
    assert len(EXPECTED) == 1 + 3 + 27 + 5 + 15 + 5 + 13 + 7 + 8 + 10 + 26 + 12 + 34


def test_decode_fixed_entry() -> None:
    entry = decode_entry(EXPECTED)
    assert entry == ENTRY
    assert entry.spec == SPEC
    assert entry.call_sha256_hex == DIGEST.hex()
    assert decode_entry(bytearray(EXPECTED)) == ENTRY
    assert decode_entry(memoryview(EXPECTED)) == ENTRY


def test_from_receipt_rebuilds_the_leaf() -> None:
    receipt = {
        "spec": SPEC,
        "id": ID,
        "server": "weather",
        "tool": "get_forecast",
        "call_sha256": DIGEST.hex(),
        "issued_at": ISSUED_AT,
        "ledger": {"origin": "example.com/log", "index": 7, "entry_url": "https://x/e"},
        "signature": {"alg": "EdDSA", "kid": "k", "sig": "s"},
        "proof": "c2sp.org/tlog-proof@v1\n",
    }
    assert LogEntry.from_receipt(receipt).encode() == EXPECTED


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"spec": "rs-tool-call/2"}, "spec"),
        ({"call_sha256": DIGEST.hex().upper()}, "call_sha256"),
        ({"call_sha256": DIGEST.hex()[:-2]}, "call_sha256"),
        ({"call_sha256": None}, "call_sha256"),
        ({"id": "tc_short"}, "id"),
        ({"issued_at": "2026-11-29T20:49:44Z"}, "issued_at"),
        ({"server": 3}, "server"),
    ],
)
def test_from_receipt_refusals(change: dict[str, object], message: str) -> None:
    receipt: dict[str, object] = {
        "spec": SPEC,
        "id": ID,
        "server": "weather",
        "tool": "get_forecast",
        "call_sha256": DIGEST.hex(),
        "issued_at": ISSUED_AT,
    }
    receipt.update(change)
    with pytest.raises(EntryError, match=message):
        LogEntry.from_receipt(receipt)
    del receipt["tool"]
    with pytest.raises(EntryError):
        LogEntry.from_receipt(receipt)


def _map(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "spec": SPEC,
        "id": ID,
        "server": "weather",
        "tool": "get_forecast",
        "call_sha256": DIGEST,
        "issued_at": ISSUED_AT,
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


@pytest.mark.parametrize(
    "data",
    [
        # same values, not deterministic: insertion-order keys
        cbor2.dumps(_map(), canonical=False),
        # indefinite-length map
        cbor2.dumps(_map(), canonical=True, indefinite_containers=True),
        EXPECTED + b"\x00",  # trailing byte
        EXPECTED[:-1],  # truncated
        b"",
        b"\xff",
        cbor2.dumps([1, 2], canonical=True),
        cbor2.dumps(_map(extra=1), canonical=True),
        cbor2.dumps(_map(tool=...), canonical=True),
        cbor2.dumps(_map(spec="rs-tool-call/2"), canonical=True),
        cbor2.dumps(_map(call_sha256=DIGEST[:31]), canonical=True),
        cbor2.dumps(_map(call_sha256=DIGEST.hex()), canonical=True),
        cbor2.dumps(_map(server=b"weather"), canonical=True),
        cbor2.dumps(_map(server=""), canonical=True),
        cbor2.dumps(_map(id="tc_" + "A" * 21 + "B"), canonical=True),  # non-canonical id
        cbor2.dumps(_map(issued_at="2026-11-29T20:49:44.123+00:00"), canonical=True),
        cbor2.dumps(_map(issued_at=datetime(2026, 1, 1, tzinfo=UTC)), canonical=True),
        # duplicate key (hand-built: a map(7) repeating "id")
        EXPECTED[:1].replace(b"\xa6", b"\xa7") + EXPECTED[1:] + b"\x62id\x78\x19" + ID.encode(),
        b"\x00" * (MAX_ENTRY_SIZE + 1),
    ],
)
def test_decode_refuses(data: bytes) -> None:
    with pytest.raises(EntryError):
        decode_entry(data)


def test_decode_refuses_non_bytes() -> None:
    with pytest.raises(EntryError):
        decode_entry(EXPECTED.hex())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"id": "tc_"},
        {"id": None},
        {"server": ""},
        {"tool": "x" * (MAX_NAME_CHARS + 1)},
        {"call_sha256": DIGEST[:31]},
        {"call_sha256": bytearray(DIGEST)},
        {"call_sha256": DIGEST.hex()},
        {"issued_at": "2026-11-29T20:49:44.1234Z"},
    ],
)
def test_log_entry_validates(change: dict[str, Any]) -> None:
    fields: dict[str, Any] = {
        "id": ID,
        "server": "weather",
        "tool": "get_forecast",
        "call_sha256": DIGEST,
        "issued_at": ISSUED_AT,
    }
    fields.update(change)
    with pytest.raises(EntryError):
        LogEntry(**fields)


def test_largest_entry_fits_a_bundle() -> None:
    big = "\U0010ffff" * MAX_NAME_CHARS  # 4 UTF-8 bytes a character
    entry = LogEntry(id=ID, server=big, tool=big, call_sha256=DIGEST, issued_at=ISSUED_AT)
    data = entry.encode()
    assert len(data) < MAX_ENTRY_SIZE
    assert decode_entry(data) == entry


# --- ids and timestamps -------------------------------------------------------------------


def test_new_receipt_id_shape() -> None:
    ids = {new_receipt_id() for _ in range(200)}
    assert len(ids) == 200
    for rid in ids:
        assert len(rid) == 25
        assert is_receipt_id(rid)
        assert len(b64url_decode(rid[3:])) == 16


@pytest.mark.parametrize(
    "value",
    [
        "tc_AAECAwQFBgcICQoLDA0ODx",  # last character carries non-zero spare bits
        "tc_AAECAwQFBgcICQoLDA0OD",  # 21 characters
        "tc_AAECAwQFBgcICQoLDA0ODwA",  # 23 characters
        "TC_AAECAwQFBgcICQoLDA0ODw",
        "tc_AAECAwQFBgcICQoLDA0OD+",
        "tc_AAECAwQFBgcICQoLDA0OD=",
        "tc_AAECAwQFBgcICQoLDA0ODw\n",
        "",
        None,
        b"tc_AAECAwQFBgcICQoLDA0ODw",
    ],
)
def test_is_receipt_id_is_strict(value: object) -> None:
    assert not is_receipt_id(value)
    assert is_receipt_id(ID)


@given(st.binary(max_size=64))
def test_b64url_round_trip(data: bytes) -> None:
    text = b64url_encode(data)
    assert "=" not in text
    assert re.fullmatch(r"[A-Za-z0-9_-]*", text)
    assert b64url_decode(text) == data


@pytest.mark.parametrize("text", ["AB==", "A", "AB+/", "AB C", "AR", "AAB"])
def test_b64url_decode_is_strict(text: str) -> None:
    # "AR" and "AAB" carry non-zero spare bits: another spelling of "AQ" / "AAA".
    with pytest.raises(ValueError):
        b64url_decode(text)


def test_format_issued_at() -> None:
    dt = datetime(2026, 11, 29, 20, 49, 44, 123999, tzinfo=UTC)
    assert format_issued_at(dt) == "2026-11-29T20:49:44.123Z"  # truncated, not rounded
    plus2 = timezone(timedelta(hours=2))
    assert format_issued_at(datetime(2026, 1, 1, 1, 0, 0, tzinfo=plus2)) == (
        "2025-12-31T23:00:00.000Z"
    )
    assert format_issued_at(datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)) == (
        "2026-12-31T23:59:59.999Z"
    )
    with pytest.raises(ValueError, match="naive"):
        format_issued_at(datetime(2026, 1, 1))


def test_parse_issued_at() -> None:
    dt = parse_issued_at(ISSUED_AT)
    assert dt == datetime(2026, 11, 29, 20, 49, 44, 123000, tzinfo=UTC)
    assert dt.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-29T20:49:44Z",
        "2026-11-29T20:49:44.12Z",
        "2026-11-29T20:49:44.1234Z",
        "2026-11-29t20:49:44.123z",
        "2026-11-29 20:49:44.123Z",
        "2026-11-29T20:49:44.123+00:00",
        "2026-02-30T00:00:00.000Z",
        "2026-11-29T24:00:00.000Z",
        "2026-12-31T23:59:60.000Z",
        "0000-01-01T00:00:00.000Z",
        "٢٠٢٦-11-29T20:49:44.123Z",  # non-ASCII digits
        "2026-11-29T20:49:44.123Z\n",
        "",
    ],
)
def test_parse_issued_at_is_strict(text: str) -> None:
    with pytest.raises(ValueError):
        parse_issued_at(text)


def test_now_issued_at() -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    now = now_issued_at()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now)
    assert before <= parse_issued_at(now) <= datetime.now(UTC)


_ZONES = st.builds(lambda m: timezone(timedelta(minutes=m)), st.integers(-1439, 1439))


@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                    timezones=st.one_of(st.just(UTC), _ZONES)))
def test_issued_at_is_each_field_in_its_place(dt: datetime) -> None:
    u = dt.astimezone(UTC)
    assert format_issued_at(dt) == (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
        f".{u.microsecond // 1000:03d}Z")


@given(st.datetimes(timezones=st.just(UTC)))
def test_issued_at_round_trip(dt: datetime) -> None:
    text = format_issued_at(dt)
    assert format_issued_at(parse_issued_at(text)) == text
    assert dt - parse_issued_at(text) < timedelta(milliseconds=1)


# --- properties ---------------------------------------------------------------------------

_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=MAX_NAME_CHARS)
entries = st.builds(
    LogEntry,
    id=st.binary(min_size=16, max_size=16).map(lambda b: "tc_" + b64url_encode(b)),
    server=_names,
    tool=_names,
    call_sha256=st.binary(min_size=32, max_size=32),
    issued_at=st.datetimes(timezones=st.just(UTC)).map(format_issued_at),
)


@given(entries)
def test_entry_round_trip(entry: LogEntry) -> None:
    data = entry.encode()
    assert decode_entry(data) == entry
    assert cbor2.loads(data) == entry.to_map()
    receipt = {**entry.to_map(), "call_sha256": entry.call_sha256_hex}
    assert LogEntry.from_receipt(receipt) == entry


@given(entries, st.data())
def test_any_byte_flip_is_refused_or_a_different_entry(
    entry: LogEntry, data: st.DataObject
) -> None:
    encoded = bytearray(entry.encode())
    pos = data.draw(st.integers(0, len(encoded) - 1))
    encoded[pos] ^= data.draw(st.integers(1, 255))
    try:
        other = decode_entry(bytes(encoded))
    except EntryError:
        return
    assert other != entry


@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_entry_error(data: bytes) -> None:
    try:
        entry = decode_entry(data)
    except EntryError:
        return
    assert entry.encode() == data


@given(entries)
def test_encode_is_cbor2_canonical_for_any_entry(entry: LogEntry) -> None:
    """The directly written encoding is byte for byte cbor2's deterministic one, names of
    any length and script included (1-, 2- and 3-byte CBOR length heads)."""
    assert entry.encode() == cbor2.dumps(entry.to_map(), canonical=True)


@pytest.mark.parametrize("length", [1, 23, 24, 255, 256])
def test_encode_is_cbor2_canonical_at_length_boundaries(length: int) -> None:
    for char in ("a", "é", "€", "😀"):  # 1 to 4 UTF-8 bytes: lengths up to 1,024 bytes
        name = (char * length)[:MAX_NAME_CHARS]
        entry = LogEntry(id=ID, server=name, tool=name, call_sha256=DIGEST, issued_at=ISSUED_AT)
        assert entry.encode() == cbor2.dumps(entry.to_map(), canonical=True)


@given(server=_names, tool=_names, digest=st.binary(min_size=32, max_size=32),
       now=st.datetimes(timezones=st.just(UTC)))
def test_a_fresh_entry_is_one_the_checking_constructor_accepts(
        server: str, tool: str, digest: bytes, now: datetime) -> None:
    # LogEntry.fresh skips checking the id and time it makes itself: they must be exactly
    # what the full checks accept, so the entry is the same value either way.
    entry = LogEntry.fresh(server, tool, digest, now)
    assert entry == LogEntry(id=entry.id, server=server, tool=tool, call_sha256=digest,
                             issued_at=entry.issued_at)
    assert entry.issued_at == format_issued_at(now)
    assert decode_entry(entry.encode()) == entry


def test_fresh_entries_get_distinct_ids() -> None:
    now = datetime.now(UTC)
    assert len({LogEntry.fresh("s", "t", DIGEST, now).id for _ in range(100)}) == 100


@pytest.mark.parametrize(
    ("server", "tool", "digest"),
    [("", "t", DIGEST), ("s", "x" * (MAX_NAME_CHARS + 1), DIGEST), ("s", "t", DIGEST[:31]),
     ("s", "t", DIGEST.hex()), ("s", "t", bytearray(DIGEST))],
)
def test_fresh_checks_the_callers_values(server: str, tool: str, digest: Any) -> None:
    with pytest.raises(EntryError):
        LogEntry.fresh(server, tool, digest, datetime.now(UTC))


def test_fresh_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError, match="timezone"):
        LogEntry.fresh("s", "t", DIGEST, datetime(2026, 1, 1))


@given(st.binary(max_size=96))
def test_b64url_encode_is_the_standard_library_spelling(data: bytes) -> None:
    import base64

    assert b64url_encode(data) == base64.urlsafe_b64encode(data).rstrip(b"=").decode()
