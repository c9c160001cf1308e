"""Server names belong to accounts: when two names count as one, and who may notarize under one.

A receipt names the server it was issued for, and the explorer lists a server's history by that
name, so a name must not be usable by just any API key: the first account to notarize under a
name holds it (decided in the log's write transaction), and another account is refused that
name and every name that looks like it. "Looks like" is the UTS #39 confusable skeleton
(Unicode's confusables data, through ICU's ``SpoofChecker``): ``wеather`` with a Cyrillic
``е`` has the skeleton of ``weather``. Names are NFKC-normalized first (full-width letters)
and the skeleton is taken again after case folding, so ``Weather`` and ``WEATHER`` count as
``weather`` too: a list a person reads is the threat, not a byte comparison.

Pure: ICU is a library of tables and functions here, with no I/O.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeGuard

import icu

from notary.core.records import MAX_NAME_CHARS

__all__ = ["NameHold", "is_valid_name", "name_skeleton", "refusal_reason", "skeletons"]


def is_valid_name(value: object) -> TypeGuard[str]:
    """A server or tool name a request may carry: 1 to ``MAX_NAME_CHARS`` printable
    characters."""
    return isinstance(value, str) and 1 <= len(value) <= MAX_NAME_CHARS and value.isprintable()
_CHECKER = icu.SpoofChecker()


@functools.lru_cache(maxsize=4096)  # a batch's few names, asked by the screen and the store
def name_skeleton(name: str) -> str:
    """The key under which names count as one: UTS #39 ``skeleton`` of the NFKC form, then
    again of its case fold (``skeleton(X) = skeleton(Y)`` is the standard's "confusable")."""
    first = str(_CHECKER.getSkeleton(0, unicodedata.normalize("NFKC", name)))
    return str(_CHECKER.getSkeleton(0, first.casefold()))


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


def skeletons(names: Iterable[str]) -> dict[str, str]:
    """{name: skeleton} of distinct names."""
    return {n: name_skeleton(n) for n in set(names)}
