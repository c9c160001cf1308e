"""RFC 8785 (JCS) bytes of a receipt's signed part, written directly for its fixed shape (pure).

Signing a receipt needs the JCS of ``{spec, id, server, tool, call_sha256, issued_at,
ledger: {origin, index, entry_url}}``. The general serializer (``rfc8785.dumps``) sorts the
keys, dispatches on every value's type and escapes every string character by character, which
cost more per receipt than the Ed25519 signature itself. Here the shape is known, so the keys
are written in their JCS order (UTF-16 code units: ``call_sha256 < id < issued_at < ledger <
server < spec < tool`` and ``entry_url < index < origin``) and each string that needs no escape
(ASCII without ``"``, ``\\`` or control characters: all ids, digests, times, and nearly all
names and URLs) is copied as it is.

Nothing else is written by hand: any string that needs escaping or is not ASCII is serialized
by ``rfc8785`` itself (JCS of an object is the concatenation of its members' JCS, so the
result is the same bytes), and anything that is not exactly the receipt shape (a missing or
extra key, a value of another type, an index beyond 2^53−1) goes to ``rfc8785.dumps`` whole.
``tests/notary/core/test_receipt_jcs.py`` checks with property tests that the output equals
``rfc8785.dumps`` (or raises as it does) for arbitrary strings, numbers and shapes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

import rfc8785

__all__ = ["MAX_INDEX", "receipt_jcs", "unsigned_receipt_jcs"]

MAX_INDEX = 2**53 - 1
_TOP = ("call_sha256", "id", "issued_at", "ledger", "server", "spec", "tool")
_LEDGER = ("entry_url", "index", "origin")


_PLAIN = re.compile(r'[ !#-\[\]-~]*')
"""Printable ASCII (0x20-0x7E) but ``"`` and ``\\``: written in JCS exactly as it is."""


def _quoted(value: str) -> str:
    """JCS of one string, as text: copied when nothing in it needs escaping, else rfc8785's."""
    if _PLAIN.fullmatch(value):
        return f'"{value}"'
    return rfc8785.dumps(value).decode("utf-8")


def unsigned_receipt_jcs(*, spec: str, id: str, server: str, tool: str, call_sha256: str,
                         issued_at: str, origin: str, index: int, entry_url: str) -> bytes:
    """JCS of the receipt's signed members, given as values (what a signer holds).

    Equal to ``rfc8785.dumps`` of the receipt object built from them; a value of an
    unexpected type (not exactly a ``str``, or an index that is not an ``int`` within
    ±(2^53−1)) is handed to ``rfc8785.dumps`` with the whole object, which serializes or
    refuses it.
    """
    if (type(spec) is type(id) is type(server) is type(tool) is type(call_sha256)
            is type(issued_at) is type(origin) is type(entry_url) is str
            and type(index) is int and -MAX_INDEX <= index <= MAX_INDEX):
        if _PLAIN.fullmatch(f"{spec}{id}{server}{tool}{call_sha256}{issued_at}{origin}"
                            f"{entry_url}"):  # the common case: one scan, one format
            return (f'{{"call_sha256":"{call_sha256}","id":"{id}","issued_at":"{issued_at}",'
                    f'"ledger":{{"entry_url":"{entry_url}","index":{index},'
                    f'"origin":"{origin}"}},"server":"{server}","spec":"{spec}",'
                    f'"tool":"{tool}"}}').encode("ascii")
        c, i, t, u, o, sv, sp, tl = (  # in JCS order: the first refused is rfc8785's first
            _quoted(call_sha256), _quoted(id), _quoted(issued_at), _quoted(entry_url),
            _quoted(origin), _quoted(server), _quoted(spec), _quoted(tool))
        return (f'{{"call_sha256":{c},"id":{i},"issued_at":{t},"ledger":{{"entry_url":{u},'
                f'"index":{index},"origin":{o}}},"server":{sv},"spec":{sp},"tool":{tl}}}'
                ).encode()
    return rfc8785.dumps(cast(Any, {
        "spec": spec, "id": id, "server": server, "tool": tool, "call_sha256": call_sha256,
        "issued_at": issued_at,
        "ledger": {"origin": origin, "index": index, "entry_url": entry_url}}))


def receipt_jcs(unsigned: Mapping[str, object]) -> bytes:
    """``rfc8785.dumps(unsigned)``, fast when ``unsigned`` is exactly a receipt's signed part.

    The fast path needs a ``dict`` with exactly the seven signed keys whose ``ledger`` is a
    ``dict`` with exactly ``origin``, ``index`` and ``entry_url``; anything else is passed
    to ``rfc8785.dumps`` as it is.
    """
    ledger = unsigned.get("ledger") if type(unsigned) is dict else None
    if (type(ledger) is not dict or len(unsigned) != len(_TOP) or len(ledger) != len(_LEDGER)
            or not all(k in unsigned for k in _TOP) or not all(k in ledger for k in _LEDGER)):
        return rfc8785.dumps(cast(Any, unsigned))
    u, lg = cast(dict[str, Any], unsigned), cast(dict[str, Any], ledger)
    return unsigned_receipt_jcs(
        spec=u["spec"], id=u["id"], server=u["server"], tool=u["tool"],
        call_sha256=u["call_sha256"], issued_at=u["issued_at"], origin=lg["origin"],
        index=lg["index"], entry_url=lg["entry_url"])
