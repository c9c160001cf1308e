"""The receipt JCS fast path gives exactly ``rfc8785.dumps``'s bytes, or refuses as it does."""

from __future__ import annotations

import copy
from typing import Any

import nacl.signing
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from notary.core import receipts as receipts_module
from notary.core.canonical import canonical_json
from notary.core.ids import b64url_decode
from notary.core.jwks import Jwks
from notary.core.receipt_jcs import MAX_INDEX, receipt_jcs, unsigned_receipt_jcs
from notary.core.receipts import ReceiptFormatError, ReceiptKey, validate_receipt_shape

KEY = ReceiptKey.from_seed(bytes(range(32)))

# Any code point, lone surrogates and control characters included, with the characters that
# need escaping in JSON (and the ASCII/non-ASCII boundary) drawn often.
_TRICKY = st.sampled_from(['"', "\\", "\x00", "\x1f", "\x7f", "\x80", "\u2028", "\ud800",
                           "\udfff", "\U0001f600", "/", " ", "\t", "\n"])
_CHAR = st.one_of(st.characters(exclude_categories=()), _TRICKY)
TEXT = st.one_of(st.text(alphabet=_CHAR, max_size=40),
                 st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E),
                         max_size=80))
INDEX = st.one_of(st.integers(min_value=0, max_value=MAX_INDEX),
                  st.integers(min_value=-(2**60), max_value=2**60),
                  st.sampled_from([MAX_INDEX, MAX_INDEX + 1, -MAX_INDEX, -MAX_INDEX - 1, 0]))
OTHER = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.floats(),
                  st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                       st.integers(), max_size=2))

FIELDS = ("spec", "id", "server", "tool", "call_sha256", "issued_at")


def _receipt(values: dict[str, Any]) -> dict[str, Any]:
    return {"spec": values["spec"], "id": values["id"], "server": values["server"],
            "tool": values["tool"], "call_sha256": values["call_sha256"],
            "issued_at": values["issued_at"],
            "ledger": {"origin": values["origin"], "index": values["index"],
                       "entry_url": values["entry_url"]}}


def _outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as e:  # the same exception type and message is the same refusal
        return "error", (type(e), str(e))


VALUES = st.fixed_dictionaries({
    **{f: TEXT for f in FIELDS}, "origin": TEXT, "entry_url": TEXT, "index": INDEX})


@settings(max_examples=800)
@given(VALUES)
def test_equal_to_rfc8785_for_any_strings_and_integers(values: dict[str, Any]) -> None:
    obj = _receipt(values)
    expected = _outcome(rfc8785.dumps, obj)
    assert _outcome(receipt_jcs, obj) == expected
    assert _outcome(unsigned_receipt_jcs, **values) == expected


@settings(max_examples=400)
@given(VALUES, st.sampled_from([*FIELDS, "origin", "entry_url", "index"]), OTHER)
def test_equal_to_rfc8785_when_a_value_has_another_type(
        values: dict[str, Any], field: str, other: Any) -> None:
    values = {**values, field: other}
    obj = _receipt(values)
    expected = _outcome(rfc8785.dumps, obj)
    assert _outcome(receipt_jcs, obj) == expected
    assert _outcome(unsigned_receipt_jcs, **values) == expected


@settings(max_examples=400)
@given(VALUES, st.data())
def test_equal_to_rfc8785_for_other_shapes(values: dict[str, Any], data: st.DataObject) -> None:
    obj = _receipt(values)
    where = data.draw(st.sampled_from(["top", "ledger"]))
    target = obj if where == "top" else obj["ledger"]
    action = data.draw(st.sampled_from(["drop", "add", "replace"]))
    if action == "drop":
        del target[data.draw(st.sampled_from(sorted(target)))]
    elif action == "add":
        target[data.draw(TEXT)] = data.draw(st.one_of(TEXT, INDEX, OTHER))
    else:
        obj["ledger"] = data.draw(st.one_of(OTHER, TEXT, st.lists(TEXT, max_size=2)))
    assert _outcome(receipt_jcs, obj) == _outcome(rfc8785.dumps, obj)


def test_a_typical_receipt_and_canonical_json_agree() -> None:
    obj: dict[str, Any] = {"spec": "rs-tool-call/1", "id": "tc_AAAAAAAAAAAAAAAAAAAAAA",
           "server": "weather — \"prod\"", "tool": "forecast\\v2",
           "call_sha256": "ab" * 32, "issued_at": "2026-11-29T20:49:44.123Z",
           "ledger": {"origin": "notary.example/log", "index": 123456,
                      "entry_url": "https://notary.example/v1/ledger/entries/123456"}}
    before = copy.deepcopy(obj)
    out = receipt_jcs(obj)
    assert out == rfc8785.dumps(obj) == canonical_json(obj)
    assert obj == before  # not modified
    assert out.startswith(b'{"call_sha256":"abab')


def test_lone_surrogates_are_refused_as_rfc8785_refuses_them() -> None:
    values: dict[str, Any] = {"spec": "rs-tool-call/1", "id": "x", "server": "s\ud800", "tool": "t",
              "call_sha256": "c", "issued_at": "i", "origin": "o", "index": 1,
              "entry_url": "u"}
    with pytest.raises(rfc8785.CanonicalizationError):
        unsigned_receipt_jcs(**values)


def test_a_dict_subclass_and_str_subclass_take_the_general_path() -> None:
    class D(dict[str, Any]):
        pass

    class S(str):
        pass

    obj = _receipt({**dict.fromkeys(FIELDS, "v"), "origin": "o", "entry_url": "u",
                    "index": 1})
    assert receipt_jcs(D(obj)) == rfc8785.dumps(obj)
    obj["server"] = S("srv")
    assert receipt_jcs(obj) == rfc8785.dumps(obj)


@settings(max_examples=200)
@given(TEXT, TEXT, st.integers(min_value=0, max_value=MAX_INDEX))
def test_the_issuing_signature_is_over_the_rfc8785_bytes(server: str, tool: str, index: int
                                                         ) -> None:
    """``ReceiptKey.signature_for`` (the notary's hot path, now on the fast path) signs exactly
    what rfc8785 would give, and the receipt verifies through the general verifier."""
    receipt: dict[str, Any] = {
               "spec": "rs-tool-call/1", "id": "tc_AAAAAAAAAAAAAAAAAAAAAA", "server": server,
               "tool": tool, "call_sha256": "0f" * 32, "issued_at": "2026-11-29T20:49:44.123Z",
               "ledger": {"origin": "o.example/log", "index": index,
                          "entry_url": f"http://127.0.0.1:1/v1/ledger/entries/{index}"}}
    try:
        expected = rfc8785.dumps(receipt)
    except rfc8785.CanonicalizationError:
        with pytest.raises(rfc8785.CanonicalizationError):
            KEY.signature_for(receipt)
        return
    sig = KEY.signature_for(receipt)
    assert b64url_decode(sig) == nacl.signing.SigningKey(KEY.seed).sign(expected).signature
    if receipt_shape_ok(receipt):
        signed = {**receipt, "signature": {"alg": "EdDSA", "kid": KEY.kid, "sig": sig}}
        Jwks.from_keys([KEY]).verify(signed)


def test_signature_for_takes_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []

    def spy(obj: Any) -> bytes:
        calls.append(obj)
        return receipt_jcs(obj)

    monkeypatch.setattr(receipts_module, "receipt_jcs", spy)
    receipt = _receipt({**dict.fromkeys(FIELDS, "v"), "origin": "o", "entry_url": "u",
                        "index": 1})
    KEY.signature_for({**receipt, "proof": "p"})
    assert calls == [receipt]


def receipt_shape_ok(receipt: dict[str, Any]) -> bool:
    try:
        validate_receipt_shape(receipt)
    except ReceiptFormatError:
        return False
    return True
