"""ledger.core.boundedjson: depth measured without recursion, limits enforced, strict JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.boundedjson import JsonError, nesting_depth, parse_json

_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.floats(
    allow_nan=False, allow_infinity=False)
values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=6), inner, max_size=4), max_leaves=30)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(values, st.booleans())
def test_depth_and_round_trip(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert nesting_depth(text.encode()) == depth(value)
    assert parse_json(text, max_bytes=1 << 20) == value
    if depth(value) > 0:
        with pytest.raises(JsonError, match="nested"):
            parse_json(text, max_bytes=1 << 20, max_depth=depth(value) - 1)


def test_brackets_in_strings_do_not_count() -> None:
    assert nesting_depth(b'{"a": "[[[[{{{{\\"]]"}') == 1
    assert parse_json(b'["\\\\", "[["]', max_bytes=100, max_depth=1) == ["\\", "[["]


@pytest.mark.parametrize(("data", "message"), [
    (b"[" * 30_000 + b"]" * 30_000, "nested 30000 deep"),
    (b"{\"a\": 1, \"a\": 2}", "duplicate member"),
    (b"[NaN]", "NaN"),
    (b"[Infinity]", "Infinity"),
    ("[1]".encode("utf-16"), "not UTF-8"),
    (b"\xef\xbb\xbf[1]", "BOM"),
    (b"[1", "not JSON"),
    (b"x" * 101, "101 bytes"),
])
def test_refusals(data: bytes, message: str) -> None:
    with pytest.raises(JsonError, match=message):
        parse_json(data, max_bytes=100_000 if len(data) != 101 else 100)
