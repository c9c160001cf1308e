"""rs-tool-call/1 call records: the exact bytes hashed, validation, and round trips."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notary.core.canonical import CanonicalizationError
from notary.core.records import (
    MAX_NAME_CHARS,
    SPEC,
    CallRecord,
    RecordError,
    hashed_result,
    is_final,
    new_salt,
    record_from_json,
)

SALT = "00112233445566778899aabbccddeeff"

# A wire-format MCP result: resultType and _meta must not be hashed.
RESULT: dict[str, object] = {
    "content": [{"type": "text", "text": "Sunny, 21°C\n"}],
    "structuredContent": {"tempC": 21.5, "sky": "sunny"},
    "isError": False,
    "resultType": "complete",
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weather"}},
}
ARGUMENTS: dict[str, object] = {
    "units": "metric",
    "city": "Zürich",
    "days": 3,
    "€": 1e21,
    "😀": -0.0,
}

# Written by hand: members sorted by UTF-16 code units ("€" U+20AC before the emoji's
# 0xD83D), raw UTF-8, ECMAScript numbers (1e+21, -0 as 0), the newline escaped.
EXPECTED_CANONICAL = (
    '{"arguments":{"city":"Zürich","days":3,"units":"metric","€":1e+21,"😀":0},'
    '"result":{"content":[{"text":"Sunny, 21°C\\n","type":"text"}],"isError":false,'
    '"structuredContent":{"sky":"sunny","tempC":21.5}},'
    '"salt":"00112233445566778899aabbccddeeff","server":"weather",'
    '"spec":"rs-tool-call/1","tool":"get_forecast"}'
).encode()

# The same record hashed by Node (a sorted-keys JSON.stringify, which is JCS for it).
NODE_DIGEST = "9eeca8904df68e8097bff48387f05837dbf685bb867034bbcc913ab0fa8f6b8a"


def fixed_record(**changes: Any) -> CallRecord:
    fields: dict[str, Any] = {
        "server": "weather",
        "tool": "get_forecast",
        "arguments": ARGUMENTS,
        "result": RESULT,
        "salt": SALT,
    }
    fields.update(changes)
    return CallRecord(**fields)


def test_canonical_bytes_of_a_fixed_record() -> None:
    assert fixed_record().canonical_bytes() == EXPECTED_CANONICAL


def test_call_sha256_of_a_fixed_record() -> None:
    digest = fixed_record().call_sha256()
    assert digest == hashlib.sha256(EXPECTED_CANONICAL).hexdigest()
    assert digest == NODE_DIGEST
    assert re.fullmatch(r"[0-9a-f]{64}", digest)


def test_a_record_is_encoded_once_and_stays_equal_to_a_fresh_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import notary.core.records as records

    calls: list[object] = []
    encode = records.canonical_json
    monkeypatch.setattr(records, "canonical_json",
                        lambda doc: calls.append(doc) or encode(doc))
    record = fixed_record()
    assert record.call_sha256() == NODE_DIGEST
    assert record.canonical_bytes() == EXPECTED_CANONICAL
    assert len(calls) == 1
    assert record == fixed_record()
    assert repr(record) == repr(fixed_record())


def test_meta_and_result_type_are_not_hashed() -> None:
    bare = {"content": RESULT["content"], "structuredContent": {"sky": "sunny", "tempC": 21.5}}
    bare["isError"] = False
    assert fixed_record(result=bare).call_sha256() == NODE_DIGEST
    with_more_meta = dict(RESULT, _meta={"com.rightshold/tool-call": {"id": "tc_x"}})
    assert fixed_record(result=with_more_meta).call_sha256() == NODE_DIGEST


def test_every_hashed_field_changes_the_digest() -> None:
    base = fixed_record().call_sha256()
    variants = [
        fixed_record(server="weather2"),
        fixed_record(tool="get_forecast2"),
        fixed_record(arguments=dict(ARGUMENTS, days=4)),
        fixed_record(arguments={}),
        fixed_record(result=dict(RESULT, isError=True)),
        fixed_record(result={"content": RESULT["content"]}),
        fixed_record(result={"content": RESULT["content"], "structuredContent": None}),
        fixed_record(result={"content": RESULT["content"], "structuredContent": ["sunny"]}),
        fixed_record(result={"content": RESULT["content"], "structuredContent": "sunny"}),
        fixed_record(salt=SALT[:-1] + "0"),
    ]
    digests = {v.call_sha256() for v in variants}
    assert base not in digests
    assert len(digests) == len(variants)


def test_hashed_result_members() -> None:
    assert hashed_result({"content": []}) == {"content": []}
    # structuredContent is any JSON value, hashed exactly as sent: null is not "absent".
    assert hashed_result({"content": [], "structuredContent": None, "isError": None}) == {
        "content": [], "structuredContent": None
    }
    for value in ([1, "a"], "text", 3.5, 0, True, False, {}, []):
        assert hashed_result({"content": [], "structuredContent": value}) == {
            "content": [], "structuredContent": value}
    assert hashed_result(RESULT) == {
        "content": RESULT["content"],
        "structuredContent": RESULT["structuredContent"],
        "isError": False,
    }
    assert hashed_result({"content": [], "isError": True}) == {"content": [], "isError": True}
    assert hashed_result({"content": [], "other": 1}) == {"content": []}


@pytest.mark.parametrize(
    ("result", "path"),
    [
        ({}, "$.result.content"),
        ({"content": None}, "$.result.content"),
        ({"content": {"type": "text"}}, "$.result.content"),
        ({"content": [], "isError": "yes"}, "$.result.isError"),
        ({"content": [], "isError": 0}, "$.result.isError"),
    ],
)
def test_hashed_result_refusals(result: dict[str, object], path: str) -> None:
    with pytest.raises(RecordError) as info:
        hashed_result(result)
    assert info.value.path == path
    with pytest.raises(RecordError):
        fixed_record(result=result)


@pytest.mark.parametrize(
    ("result", "final"),
    [
        ({"content": []}, True),
        ({"content": [], "resultType": None}, True),
        ({"content": [], "resultType": "complete"}, True),
        ({"content": [], "resultType": "input_required"}, False),
        ({"content": [], "resultType": "Complete"}, False),
    ],
)
def test_is_final(result: dict[str, object], final: bool) -> None:
    assert is_final(result) is final


def test_non_final_result_is_not_a_record() -> None:
    with pytest.raises(RecordError) as info:
        fixed_record(result={"content": [], "resultType": "input_required"})
    assert info.value.path == "$.result.resultType"


def test_new_salt() -> None:
    salts = {new_salt() for _ in range(50)}
    assert len(salts) == 50
    for salt in salts:
        assert re.fullmatch(r"[0-9a-f]{32}", salt)
        fixed_record(salt=salt)


@pytest.mark.parametrize("salt", [SALT, SALT * 2, SALT + "ab", "f" * 32])
def test_good_salts(salt: str) -> None:
    assert fixed_record(salt=salt).salt == salt


@pytest.mark.parametrize(
    "salt",
    [
        SALT[:-2],  # 15 bytes
        SALT + "a",  # odd length
        SALT.upper(),  # upper case: one spelling per salt
        "g" * 32,
        " " + SALT,
        "",
        b"00112233445566778899aabbccddeeff",
        None,
    ],
)
def test_bad_salts(salt: object) -> None:
    with pytest.raises(RecordError) as info:
        fixed_record(salt=salt)
    assert info.value.path == "$.salt"


@pytest.mark.parametrize("field", ["server", "tool"])
@pytest.mark.parametrize("value", ["", None, 7, "x" * (MAX_NAME_CHARS + 1), "bad\ud800name"])
def test_bad_names(field: str, value: object) -> None:
    with pytest.raises(RecordError) as info:
        fixed_record(**{field: value})
    assert info.value.path == f"$.{field}"


def test_longest_name_accepted() -> None:
    assert fixed_record(tool="t" * MAX_NAME_CHARS).tool == "t" * MAX_NAME_CHARS


@pytest.mark.parametrize("arguments", [None, [], ("a", 1), "x"])
def test_arguments_must_be_an_object(arguments: object) -> None:
    with pytest.raises(RecordError) as info:
        fixed_record(arguments=arguments)
    assert info.value.path == "$.arguments"


def test_js_unsafe_values_named_within_the_record() -> None:
    with pytest.raises(CanonicalizationError) as info:
        fixed_record(arguments={"x": 2**53 + 1})
    assert info.value.path == "$.arguments.x"
    with pytest.raises(CanonicalizationError) as info:
        fixed_record(result={"content": [{"type": "text", "n": float("nan")}]})
    assert info.value.path == "$.result.content[0].n"
    with pytest.raises(CanonicalizationError) as info:
        fixed_record(result={"content": [], "structuredContent": {"a": {"b": ("t",)}}})
    assert info.value.path == "$.result.structuredContent.a.b"
    with pytest.raises(CanonicalizationError) as info:
        fixed_record(arguments={"bad key \udfff": 1})
    assert info.value.path == '$.arguments["bad key \\udfff"]'


def test_record_from_json_round_trip() -> None:
    record = fixed_record()
    doc = json.loads(json.dumps(record.to_json()))
    assert doc["spec"] == SPEC
    again = record_from_json(doc)
    assert again.call_sha256() == NODE_DIGEST
    del doc["spec"]
    assert record_from_json(doc).call_sha256() == NODE_DIGEST


def test_record_from_json_server_fallback() -> None:
    doc = fixed_record().to_json()
    del doc["server"]
    with pytest.raises(RecordError) as info:
        record_from_json(doc)
    assert info.value.path == "$.server"
    assert record_from_json(doc, server="weather").call_sha256() == NODE_DIGEST
    doc["server"] = "other"
    # the record's own server wins over the fallback
    assert record_from_json(doc, server="weather").server == "other"


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"spec": "rs-tool-call/2"}, "$.spec"),
        ({"argument": {}}, "$.argument"),
        ({"_meta": {}}, "$._meta"),
        ({"salt": 5}, "$.salt"),
        ({"tool": None}, "$.tool"),
        ({"result": []}, "$.result"),
        ({"arguments": None}, "$.arguments"),
    ],
)
def test_record_from_json_refusals(change: dict[str, object], path: str) -> None:
    doc = dict(fixed_record().to_json(), **change)
    with pytest.raises(RecordError) as info:
        record_from_json(doc)
    assert info.value.path == path


@pytest.mark.parametrize("missing", ["tool", "arguments", "result", "salt"])
def test_record_from_json_required_members(missing: str) -> None:
    doc = fixed_record().to_json()
    del doc[missing]
    with pytest.raises(RecordError) as info:
        record_from_json(doc, server="weather")
    assert info.value.path == f"$.{missing}"


def test_record_from_json_refuses_non_objects() -> None:
    with pytest.raises(RecordError):
        record_from_json([])  # type: ignore[arg-type]


# --- properties --------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=10)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)
_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=40)
records = st.builds(
    CallRecord,
    server=_names,
    tool=_names,
    arguments=st.dictionaries(_text, _json, max_size=5),
    result=st.fixed_dictionaries(
        {"content": st.lists(st.dictionaries(_text, _json, max_size=3), max_size=3)},
        optional={
            "structuredContent": st.dictionaries(_text, _json, max_size=3),
            "isError": st.booleans(),
            "_meta": st.dictionaries(_text, _json, max_size=2),
            "resultType": st.just("complete"),
        },
    ),
    salt=st.binary(min_size=16, max_size=32).map(bytes.hex),
)


@given(records)
def test_json_text_round_trip_keeps_the_digest(record: CallRecord) -> None:
    text = json.dumps(record.to_json(), ensure_ascii=False)
    assert record_from_json(json.loads(text)).call_sha256() == record.call_sha256()


@given(records)
def test_canonical_bytes_are_the_hashed_bytes(record: CallRecord) -> None:
    data = record.canonical_bytes()
    assert hashlib.sha256(data).hexdigest() == record.call_sha256()
    doc = json.loads(data)
    assert set(doc) == {"spec", "server", "tool", "arguments", "result", "salt"}
    assert "_meta" not in doc["result"]
    assert "resultType" not in doc["result"]


@given(records, st.binary(min_size=16, max_size=16).map(bytes.hex))
def test_salt_separates_identical_calls(record: CallRecord, salt: str) -> None:
    other = CallRecord(record.server, record.tool, record.arguments, record.result, salt)
    assert (other.call_sha256() == record.call_sha256()) == (salt == record.salt)
