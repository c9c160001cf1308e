"""RFC 8785 canonical JSON: published vectors, refusals with paths, and properties."""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notary.core.canonical import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    CanonicalizationError,
    canonical_json,
    check_js_safe,
    child_path,
)

# --- published vectors ---------------------------------------------------------------


def test_rfc8785_property_sorting_example() -> None:
    # RFC 8785 §3.2.3: members sorted by UTF-16 code units, so the emoji (a surrogate pair
    # starting 0xD83D) lands between U+20AC and U+FB33.
    text = (
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", '
        '"\\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", '
        '"\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", '
        '"\\u00f6": "Latin Small Letter O With Diaeresis"}'
    )
    out = canonical_json(json.loads(text)).decode("utf-8")
    values = [v for _, v in json.loads(out, object_pairs_hook=list)]
    assert values == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]


def test_reference_sample_bytes() -> None:
    # The sample in the JCS reference implementation's README (by the RFC's author), with
    # its expected UTF-8 output given there as a hex dump.
    text = (
        '{\n  "numbers": [1E30,4.50,6,2e-3,0.000000000000000000000000001],\n'
        '  "escaping": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
        '  "other":  [null, true, false]\n}'
    )
    expected = bytes.fromhex(
        "7b 22 65 73 63 61 70 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30 30 66 5c 6e 41 27 42"
        " 5c 22 5c 5c 5c 5c 5c 22 2f 22 2c 22 6e 75 6d 62 65 72 73 22 3a 5b 31 65 2b 33 30 2c"
        " 34 2e 35 2c 36 2c 30 2e 30 30 32 2c 31 65 2d 32 37 5d 2c 22 6f 74 68 65 72 22 3a 5b"
        " 6e 75 6c 6c 2c 74 72 75 65 2c 66 61 6c 73 65 5d 7d"
    )
    assert canonical_json(json.loads(text)) == expected
    assert expected == (
        b'{"escaping":"\xe2\x82\xac$\\u000f\\nA\'B\\"\\\\\\\\\\"/",'
        b'"numbers":[1e+30,4.5,6,0.002,1e-27],"other":[null,true,false]}'
    )


# RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript serialization.
RFC8785_APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


@pytest.mark.parametrize(("bits", "expected"), RFC8785_APPENDIX_B)
def test_rfc8785_appendix_b_numbers(bits: str, expected: str) -> None:
    assert canonical_json(_double(bits)) == expected.encode("ascii")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e21, b"1e+21"),
        (1e20, b"100000000000000000000"),
        (0.1, b"0.1"),
        (-0.0, b"0"),
        (1e-7, b"1e-7"),
        (1.0, b"1"),
        (-1.5, b"-1.5"),
        (0, b"0"),
        (MAX_SAFE_INTEGER, b"9007199254740991"),
        (-MAX_SAFE_INTEGER, b"-9007199254740991"),
        (True, b"true"),
        (None, b"null"),
        ("", b'""'),
        ([], b"[]"),
        ({}, b"{}"),
    ],
)
def test_scalar_formatting(value: object, expected: bytes) -> None:
    assert canonical_json(value) == expected


def test_keys_sorted_by_utf16_code_units_not_code_points() -> None:
    # U+10000 is 0xD800 0xDC00 in UTF-16, which sorts before U+E000; by code point (what
    # Python's sorted() and json.dumps(sort_keys=True) use) it would come after.
    value = {"\ue000": 1, "\U00010000": 2}
    assert canonical_json(value) == '{"\U00010000":2,"\ue000":1}'.encode()
    naive = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert naive.encode() != canonical_json(value)


def test_euro_sorts_before_emoji() -> None:
    assert canonical_json({"\U0001f600": 1, "\u20ac": 2}) == '{"€":2,"😀":1}'.encode()


def test_nested_objects_sorted_arrays_kept() -> None:
    value = {"b": [3, {"z": 1, "a": 2}], "a": {"y": None, "x": [True, False]}}
    assert canonical_json(value) == b'{"a":{"x":[true,false],"y":null},"b":[3,{"a":2,"z":1}]}'


def test_strings_raw_utf8_minimal_escapes() -> None:
    value = 'é/\u2028\x7f\x1f\t"\\'
    assert canonical_json(value) == b'"\xc3\xa9/\xe2\x80\xa8\x7f\\u001f\\t\\"\\\\"'


# --- refusals, with the path named ----------------------------------------------------


def _refusal(value: object) -> CanonicalizationError:
    with pytest.raises(CanonicalizationError) as info:
        canonical_json(value)
    return info.value


def test_big_int_refused_with_path() -> None:
    value = {"arguments": {"items": [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 2**53 + 1}]}}
    err = _refusal(value)
    assert err.path == "$.arguments.items[3].n"
    assert str(err).startswith("$.arguments.items[3].n: ")
    # names the value and what JavaScript would have turned it into
    assert "9007199254740993" in str(err)
    assert "9007199254740992" in str(err)


@pytest.mark.parametrize(
    "n", [2**53 + 1, -(2**53) - 1, 2**64 + 1, -(2**70) - 3, 1732900000000000001, 10**400]
)
def test_ints_javascript_would_round_are_refused(n: int) -> None:
    assert _refusal([n]).path == "$[0]"


def test_huge_int_refusal_does_not_print_the_number() -> None:
    # str() of a 5000-digit int raises in Python (max_str_digits); the message uses bits.
    assert "bit integer" in str(_refusal([10**5000]))


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (2**53, b"9007199254740992"),
        (-(2**53), b"-9007199254740992"),
        (10**18, b"1000000000000000000"),
        (10**21, b"1e+21"),
        (2**70, b"1.1805916207174113e+21"),
        # not exactly a double, but JavaScript spells the nearest double this way
        (35818508739113130, b"35818508739113130"),
    ],
)
def test_big_ints_javascript_keeps_are_accepted(n: int, expected: bytes) -> None:
    # JSON.parse reads these without change, so they are accepted and written the way
    # JavaScript writes that number (same bytes as the equal float).
    assert canonical_json(n) == expected == canonical_json(float(n))
    assert canonical_json(json.loads(expected)) == expected
    assert canonical_json({"a": [n]}) == b'{"a":[' + expected + b"]}"


@pytest.mark.parametrize("f", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_refused(f: float) -> None:
    err = _refusal({"x": {"y": [0, f]}})
    assert err.path == "$.x.y[1]"
    assert "NaN" in str(err) or "inf" in str(err)


def test_lone_surrogate_in_value_refused() -> None:
    err = _refusal({"text": "ok \ud83d"})
    assert err.path == "$.text"
    assert "U+D83D" in str(err)


def test_lone_surrogate_in_key_refused_path_is_ascii() -> None:
    err = _refusal({"a": {"x\udc00": 1}})
    assert err.path == '$.a["x\\udc00"]'
    assert err.path.isascii()


def test_surrogate_pair_as_two_code_points_refused() -> None:
    # A Python str holding the two halves separately is not valid Unicode text; rather
    # than guess that it meant the emoji, it is refused.
    assert _refusal(["\ud83d\ude00"]).path == "$[0]"


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        ((1, 2), "tuple"),
        ({1, 2}, "set"),
        (b"raw", "bytes"),
        (object(), "object"),
        (1j, "complex"),
    ],
)
def test_non_json_types_refused(value: object, type_name: str) -> None:
    err = _refusal({"v": value})
    assert err.path == "$.v"
    assert type_name in str(err)


def test_non_string_key_refused() -> None:
    err = _refusal({"outer": {1: "one"}})
    assert err.path == "$.outer"
    assert "keys must be strings" in str(err)


def test_depth_limit_and_cycles() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(MAX_DEPTH - 1):
        child: list[Any] = []
        node.append(child)
        node = child
    assert canonical_json(deep) == b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    node.append([])
    assert "deeper" in str(_refusal(deep))
    cycle: list[Any] = []
    cycle.append(cycle)
    assert "deeper" in str(_refusal(cycle))


def test_check_js_safe_uses_given_root_path() -> None:
    with pytest.raises(CanonicalizationError) as info:
        check_js_safe({"k": 2**60 + 1}, "$.arguments")
    assert info.value.path == "$.arguments.k"


def test_child_path_quotes_non_identifiers() -> None:
    assert child_path("$", "plain_1") == "$.plain_1"
    assert child_path("$", "a b") == '$["a b"]'
    assert child_path("$", "1st") == '$["1st"]'
    assert child_path("$", "") == '$[""]'
    assert child_path("$", 'q"') == '$["q\\""]'
    assert child_path("$.a", 7) == "$.a[7]"


# --- properties --------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=12)
# integers that are exact doubles, including ones beyond ±(2^53−1)
_exact_big_ints = st.builds(lambda m, e: m << e, st.integers(-(2**53), 2**53), st.integers(0, 900))
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | _exact_big_ints
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_text, inner, max_size=5),
    max_leaves=30,
)


def _numbers_as_float(value: Any) -> Any:
    """Normalize numbers so that 1 and 1.0 compare by value, as JSON does."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_numbers_as_float(v) for v in value]
    return {k: _numbers_as_float(v) for k, v in value.items()}


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be")


@given(json_values)
def test_output_parses_back_to_the_same_value(value: Any) -> None:
    out = canonical_json(value)
    assert _numbers_as_float(json.loads(out)) == _numbers_as_float(value)


@given(json_values)
def test_canonical_form_is_a_fixed_point(value: Any) -> None:
    out = canonical_json(value)
    assert canonical_json(json.loads(out)) == out


@given(json_values)
def test_member_order_is_utf16_at_every_level(value: Any) -> None:
    def walk(node: Any) -> None:
        if isinstance(node, list) and node and isinstance(node[0], tuple):
            keys = [k for k, _ in node]
            assert keys == sorted(keys, key=_utf16)
            for _, v in node:
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(canonical_json(value), object_pairs_hook=list))


@given(st.dictionaries(_text, st.integers(0, 9), min_size=2, max_size=8))
def test_insertion_order_does_not_matter(value: dict[str, int]) -> None:
    reordered = dict(reversed(list(value.items())))
    assert canonical_json(reordered) == canonical_json(value)


@given(st.integers(2**53, 2**75) | st.integers(-(2**75), -(2**53)))
def test_big_integers_accepted_only_if_javascript_keeps_them(n: int) -> None:
    try:
        out = canonical_json([n])
    except CanonicalizationError as err:
        assert err.path == "$[0]"
        assert float(n) != n
        assert canonical_json([float(n)]) != f"[{n}]".encode()
    else:
        # same bytes as the double JavaScript would hold, and that double is n, or is
        # spelled as n's digits
        assert out == canonical_json([float(n)])
        assert float(n) == n or out == f"[{n}]".encode()


@given(
    st.integers(2**53 + 1, 2**1100).map(lambda n: n | 1) | st.integers(2**1024, 2**2000),
    st.booleans(),
    st.integers(0, 3),
)
def test_every_integer_javascript_would_change_is_refused(n: int, negative: bool, pos: int) -> None:
    # Odd integers above 2^53 are never doubles, and a double's spelling never ends in an
    # odd digit there; those beyond 2^1024 overflow.
    n = -n if negative else n
    items: list[object] = [0, 0, 0, 0]
    items[pos] = n
    assert _refusal({"a": items}).path == f"$.a[{pos}]"


# --- differential check against JavaScript (skipped when node is not installed) ------

_NODE_JCS = r"""
const canon = (v) => Array.isArray(v) ? '[' + v.map(canon).join(',') + ']'
  : (v !== null && typeof v === 'object')
    ? '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}'
    : JSON.stringify(v);
const lines = require('fs').readFileSync(0, 'utf8').split('\n').filter((l) => l.length);
process.stdout.write(lines.map((l) => canon(JSON.parse(l))).join('\n') + '\n');
"""


_POOL = 'aZ09 "\\/\n\t\x00\x1f\x7f\u00e9\u20ac\ufb33\U0001f600\U00010000\ue000'


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(_POOL) for _ in range(rng.randrange(6)))


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        if rng.random() < 0.8:
            return rng.randint(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
        return rng.randint(-(2**53), 2**53) << rng.randrange(60)  # exact big doubles
    if kind in (2, 3):
        while True:  # arbitrary bit patterns exercise every exponent range
            f: float = struct.unpack(">d", rng.randbytes(8))[0]
            if math.isfinite(f):
                return f
    if kind in (4, 5):
        return _random_text(rng)
    if kind == 6:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_random_text(rng): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_javascript_produces_the_same_bytes() -> None:
    rng = random.Random(8785)
    values = [_random_value(rng) for _ in range(400)]
    ours = [canonical_json(v) for v in values]
    proc = subprocess.run(
        ["node", "-e", _NODE_JCS],
        input=b"\n".join(ours) + b"\n",
        capture_output=True,
        check=True,
        timeout=60,
    )
    theirs = proc.stdout.decode("utf-8").rstrip("\n").split("\n")
    assert len(theirs) == len(ours)
    for mine, js in zip(ours, theirs, strict=True):
        assert mine.decode("utf-8") == js
