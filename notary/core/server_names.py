"""Server names belong to accounts: which names a new claim may take, when two names count as
one, who may notarize under one, and how a list shows them.

A receipt names the server it was issued for, and the explorer lists a server's history by that
name, so a name must not be usable by just any API key: the first account to notarize under a
name holds it (decided in the log's write transaction), and another account is refused that
name and every name that looks like it. "Looks like" is the UTS #39 confusable skeleton
(Unicode's confusables data, through ICU's ``SpoofChecker``): ``wеather`` with a Cyrillic
``е`` has the skeleton of ``weather``. Names are NFKC-normalized first (full-width letters),
blanks are folded (a run of spaces or blank-looking characters counts as one space, and none at
either end) and the skeleton is taken again after case folding, so ``Weather``, ``WEATHER`` and
``weather `` count as ``weather`` too: a list a person reads is the threat, not a byte
comparison.

A name a request would claim must also read as what it is (:func:`server_name_problem`): no
space at either end or two in a row, no character that renders as nothing or as a blank
(default-ignorable code points such as U+200B or the Hangul fillers, U+2800 BRAILLE PATTERN
BLANK), no word mixing scripts beyond UTS #39's "moderately restrictive" level (Latin with
Cyrillic or Greek in one word), no digits of two numbering systems.

The skeletons depend on the library's data (ICU's confusables, the Unicode version), so a store
keeps them with :data:`SKELETON_VERSION` and recomputes them when it changes; a name's holder
is always found by the exact name, whatever its stored skeleton.

Pure: ICU is a library of tables and functions here, with no I/O.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeGuard

import icu

from notary.core.records import MAX_NAME_CHARS

__all__ = ["SKELETON_VERSION", "NameHold", "display_name", "holds_from_rows", "is_valid_name",
           "name_skeleton", "refusal_reason", "server_name_problem", "skeletons"]


def is_valid_name(value: object) -> TypeGuard[str]:
    """A server or tool name a request may carry: 1 to ``MAX_NAME_CHARS`` printable
    characters."""
    return isinstance(value, str) and 1 <= len(value) <= MAX_NAME_CHARS and value.isprintable()


_CHECKER = icu.SpoofChecker()

_WORDS = icu.SpoofChecker()  # one word's scripts (UTS #39 section 5.2, restriction levels)
_WORDS.setChecks(icu.USpoofChecks.RESTRICTION_LEVEL)
_WORDS.setRestrictionLevel(icu.URestrictionLevel.MODERATELY_RESTRICTIVE)
_NUMBERS = icu.SpoofChecker()
_NUMBERS.setChecks(icu.USpoofChecks.MIXED_NUMBERS)

_SKELETON_RULES = 2
"""Bumped whenever :func:`name_skeleton` itself changes (2: blanks folded)."""

SKELETON_VERSION = (f"{_SKELETON_RULES} icu-{icu.ICU_VERSION} icu-unicode-{icu.UNICODE_VERSION}"
                    f" python-unicode-{unicodedata.unidata_version}")
"""What the skeletons depend on: these rules, ICU's confusables data (its version) and the
Unicode data of NFKC and case folding. A store records it beside its stored skeletons and
recomputes them when it differs (see ``notary.store``)."""

_VISIBLE_BLANKS = frozenset("\u2800\U0001d159")
"""Printable characters that render as a blank and are not default-ignorable: BRAILLE PATTERN
BLANK, MUSICAL SYMBOL NULL NOTEHEAD."""


def _is_blank(char: str) -> bool:
    """A character that renders as nothing or as white space."""
    code = ord(char)
    return (char in _VISIBLE_BLANKS or char.isspace()
            or icu.Char.hasBinaryProperty(code, icu.UProperty.WHITE_SPACE)
            or icu.Char.hasBinaryProperty(code, icu.UProperty.DEFAULT_IGNORABLE_CODE_POINT))


def _char_name(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, '(unnamed)')}"


def _words(name: str) -> list[str]:
    """The runs of letters, marks and digits (a word's scripts are checked together)."""
    out, word = [], []
    for char in name:
        if unicodedata.category(char)[0] in "LMN":
            word.append(char)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


def server_name_problem(value: object) -> str | None:
    """Why ``value`` may not be a server name that a request claims, or None if it may.

    Beyond :func:`is_valid_name`: a name must read as what it is, so that two names a person
    cannot tell apart are never two accounts' (see the module's docstring). Names held before
    these rules keep working; they are folded into the same skeletons.
    """
    if not is_valid_name(value):
        return f"must be 1-{MAX_NAME_CHARS} printable characters"
    if value[0] == " " or value[-1] == " ":
        return "must not begin or end with a space"
    if "  " in value:
        return "must not contain two spaces in a row"
    blank = next((c for c in value if c != " " and _is_blank(c)), None)
    if blank is not None:
        return f"must not contain {_char_name(blank)}, which renders as a blank or as nothing"
    for word in _words(value):
        if _WORDS.check(word):
            where = "" if word == value else f" ({display_name(word)})"
            return (f"mixes scripts in one word{where}, as a look-alike would (e.g. Latin "
                    "with Cyrillic or Greek letters)")
    if _NUMBERS.check(value):
        return "mixes digits of different numbering systems"
    return None


_BLANK_RUNS = re.compile(r" {2,}")


def _fold_blanks(name: str) -> str:
    """Each blank (space or blank-looking character) as one space, runs as one, none at the
    ends; characters that render as nothing are left to the skeleton, which drops them."""
    spaced = "".join(" " if c in _VISIBLE_BLANKS or c.isspace() else c for c in name)
    return _BLANK_RUNS.sub(" ", spaced).strip(" ")


@functools.lru_cache(maxsize=4096)  # a batch's few names, asked by the screen and the store
def name_skeleton(name: str) -> str:
    """The key under which names count as one: UTS #39 ``skeleton`` of the NFKC form with its
    blanks folded, then again of its case fold (``skeleton(X) = skeleton(Y)`` is the
    standard's "confusable")."""
    first = str(_CHECKER.getSkeleton(0, _fold_blanks(unicodedata.normalize("NFKC", name))))
    return _fold_blanks(str(_CHECKER.getSkeleton(0, first.casefold())))


def display_name(name: str) -> str:
    """How a list shows a server name so that two different names never print the same: as
    it is when it is printable ASCII without a space at either end or two in a row (and does
    not begin with ``"``), else as a JSON string in ASCII (``"w\\u0435ather"``, ``"weather "``).
    Shown names of the two kinds never meet (only the second begins with ``"``)."""
    if (name and all(" " <= c <= "~" for c in name) and name[0] not in ' "'
            and name[-1] != " " and "  " not in name):
        return name
    return json.dumps(name, ensure_ascii=True)


@dataclass(frozen=True)
class NameHold:
    """Who holds a server name, read under the log's write lock.

    ``holder``: the account that holds exactly this name (None: nobody); ``confusable``: every
    account that holds a name with the same skeleton (this one's holder included).
    """

    holder: str | None = None
    confusable: frozenset[str] = frozenset()

    def with_claim(self, name: str, asked: str, account: str) -> NameHold:
        """This hold once ``account`` claimed ``name`` (same skeleton as the name ``asked``)."""
        holder = account if name == asked and self.holder is None else self.holder
        return NameHold(holder, self.confusable | {account})


def refusal_reason(account: str, hold: NameHold) -> str | None:
    """Why ``account`` may not notarize under a name with this hold, or None if it may.

    The holder of the exact name may (an operator may have granted two look-alike names to two
    accounts: each keeps its own). A free name may be taken unless a look-alike is another
    account's. The reason never names the holding account.
    """
    if hold.holder is not None:
        return None if hold.holder == account else "it is held by another account"
    if hold.confusable - {account}:
        return "it is confusable with a server name another account holds"
    return None


def holds_from_rows(asked: Mapping[str, str], rows: Iterable[tuple[str, str | None, str]]
                    ) -> dict[str, NameHold]:
    """The hold of each asked name (``{name: its skeleton now}``) from the stored rows
    ``(name, stored skeleton, account)`` that have an asked name or skeleton.

    The holder is the account of the row of exactly the name, whatever skeleton is stored with
    it (skeletons follow the library's data; a hold does not). The look-alikes are the rows
    with the same skeleton, plus the holder.
    """
    exact: dict[str, str] = {}
    by_skeleton: dict[str | None, set[str]] = {}
    for name, skeleton, account in rows:
        exact[name] = account
        by_skeleton.setdefault(skeleton, set()).add(account)
    out = {}
    for name, skeleton in asked.items():
        holder = exact.get(name)
        alike = by_skeleton.get(skeleton, set()) | ({holder} if holder is not None else set())
        out[name] = NameHold(holder, frozenset(alike))
    return out


def skeletons(names: Iterable[str]) -> dict[str, str]:
    """{name: skeleton} of distinct names."""
    return {n: name_skeleton(n) for n in set(names)}
