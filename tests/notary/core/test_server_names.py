"""Server names: which a request may claim, when two count as one, how a list shows them, and
who holds one (found by the exact name, whatever skeleton is stored)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from notary.core.server_names import (
    NameHold,
    display_name,
    holds_from_rows,
    name_skeleton,
    server_name_problem,
)


@pytest.mark.parametrize(("name", "why"), [
    ("weather ", "begin or end with a space"), (" weather", "begin or end with a space"),
    ("my  server", "two spaces in a row"),
    ("weather\u2800", "U+2800 BRAILLE PATTERN BLANK"),
    ("\u3164weather", "U+3164 HANGUL FILLER"), ("wea\u115fther", "U+115F"),
    ("wea\u1160ther", "U+1160"), ("weather\uffa0", "U+FFA0"), ("we\u034father", "U+034F"),
    ("weather\ufe0f", "U+FE0F"), ("weather\U0001d159", "U+1D159"),
    ("w\u0435ather", "mixes scripts in one word"),  # Cyrillic е among Latin letters
    ("my w\u0435ather", "mixes scripts in one word (\"w\\u0435ather\")"),
    ("\u03b1lpha", "mixes scripts"),  # Greek α
    ("v1\u0662", "numbering systems"),
    ("wea\u200bther", "printable"), ("", "printable"), ("x" * 257, "printable"),
])
def test_names_that_do_not_read_as_what_they_are_are_refused(name: str, why: str) -> None:
    problem = server_name_problem(name)
    assert problem is not None and why in problem


@pytest.mark.parametrize("name", [
    "weather", "my server", "Weather-API_v2", "srv.example.com/mcp:8080", "caf\u00e9",
    "\u043f\u043e\u0433\u043e\u0434\u0430", "mcp-\u043f\u043e\u0433\u043e\u0434\u0430",
    "\u5929\u6c17\u3066\u3093\u304d", "\u5929\u6c14weather", "\uff57eather", "paypaI",
])
def test_names_in_use_are_accepted(name: str) -> None:
    assert server_name_problem(name) is None


def test_blanks_fold_into_the_skeleton() -> None:
    for name in ("weather ", " weather", "weather\u2800", "\u2800weather", "wea\u3164ther",
                 "weather\U0001d159", "\uff37EATHER"):
        assert name_skeleton(name) == name_skeleton("weather"), name
    assert name_skeleton("my  server") == name_skeleton("my server ") == name_skeleton(
        "my server")
    assert name_skeleton("my server") != name_skeleton("myserver")


def test_display_names_are_ascii_and_plain_ones_unchanged() -> None:
    assert display_name("weather") == "weather"
    assert display_name("my server") == "my server"
    assert display_name("weather ") == '"weather "'
    assert display_name("w\u0435ather") == '"w\\u0435ather"'
    assert display_name('"weather"') == '"\\"weather\\""'
    assert display_name("w\\u0435ather") == "w\\u0435ather"  # a backslash, then ASCII


@given(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=12))
def test_two_different_names_never_display_the_same(a: str, b: str) -> None:
    shown = display_name(a)
    assert shown.isascii() and shown.isprintable()
    assert (shown == display_name(b)) == (a == b)
    if shown.startswith('"'):
        assert json.loads(shown) == a


def test_the_holder_is_found_by_the_exact_name_whatever_skeleton_is_stored() -> None:
    asked = {"weather": name_skeleton("weather"), "WEATHER": name_skeleton("WEATHER")}
    rows = [("weather", "stale skeleton", "alice"), ("Weather", name_skeleton("weather"), "bob")]
    holds = holds_from_rows(asked, rows)
    assert holds["weather"] == NameHold("alice", frozenset({"alice", "bob"}))
    assert holds["WEATHER"] == NameHold(None, frozenset({"bob"}))
