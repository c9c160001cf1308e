"""The notary's chain of logs as a monitor checks it (pure): the published list against the
successor records (docs/lifecycle.md).

``GET /v1/ledger``'s ``logs`` says which logs a notary has and where they are served, but it is
not signed: a monitor trusts only the first log's key, and each later log's key from the
successor record that ends the log before it (an entry under that log's signed, witnessed
checkpoint). These functions read the list strictly and compare it with the records; every
failure is a :class:`ChainError`, which the monitor raises as a ``log_chain`` alarm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urljoin

from ledger.core.cosignature import parse_log_key
from ledger.core.note import NoteError, NoteVerifier
from notary.core.errors import NotaryBaseError
from notary.core.successor import SuccessorError, SuccessorRecord, decode_successor

__all__ = ["ChainError", "ListedLog", "next_key", "parse_log_list", "start_of",
           "successor_of"]

#: More logs than a notary rolling hourly for a decade would have: a bound on what is read.
MAX_LOGS = 100_000


class ChainError(NotaryBaseError, ValueError):
    """The list of logs, or a successor record, contradicts the chain the monitor follows."""


@dataclass(frozen=True)
class ListedLog:
    """One entry of ``/v1/ledger``'s ``logs``, as far as the monitor uses it."""

    origin: str
    vkeys: tuple[str, ...]
    state: str  # "active" or "frozen"
    size: int
    url: str  # absolute


def _text(item: dict[str, object], name: str, i: int) -> str:
    value = item.get(name)
    if not isinstance(value, str) or not value:
        raise ChainError(f"logs[{i}].{name} is not a non-empty string")
    return value


def parse_log_list(logs: object, base_url: str) -> list[ListedLog]:
    """The list, oldest first: every log frozen but the last, which is active; a relative
    ``url`` is taken relative to ``base_url``."""
    if not isinstance(logs, list) or not logs or len(logs) > MAX_LOGS:
        raise ChainError("logs is not a non-empty list")
    out: list[ListedLog] = []
    for i, item in enumerate(logs):
        if not isinstance(item, dict):
            raise ChainError(f"logs[{i}] is not an object")
        vkeys = item.get("vkeys")
        if not isinstance(vkeys, list) or not vkeys or not all(
                isinstance(k, str) and k for k in vkeys):
            raise ChainError(f"logs[{i}].vkeys is not a non-empty list of strings")
        size = item.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ChainError(f"logs[{i}].size is not a non-negative integer")
        state = _text(item, "state", i)
        want = "active" if i == len(logs) - 1 else "frozen"
        if state != want:
            raise ChainError(f"logs[{i}] is {state!r}: every log but the last is frozen and "
                             "the last is active")
        out.append(ListedLog(_text(item, "origin", i), tuple(vkeys), state, size,
                             urljoin(base_url.rstrip("/") + "/", _text(item, "url", i))))
    return out


def start_of(logs: Sequence[ListedLog], origin: str, vkey: str) -> int:
    """The position of the pinned log (``origin``, ``vkey``) in the list: the chain is
    followed from there."""
    for i, log in enumerate(logs):
        if log.origin == origin:
            if vkey not in log.vkeys:
                raise ChainError(f"the notary lists log {origin} with keys {list(log.vkeys)}, "
                                 "without the pinned key")
            return i
    raise ChainError(f"the notary does not list the pinned log {origin}")


def successor_of(entry: bytes, frozen: ListedLog, listed_next: ListedLog | None
                 ) -> SuccessorRecord:
    """The successor record that is ``frozen``'s last entry, checked against the list: it must
    name ``frozen`` as its previous log and exactly the next listed log's origin and keys."""
    try:
        record = decode_successor(entry)
    except SuccessorError as e:
        raise ChainError(f"the last entry of frozen log {frozen.origin} is not a successor "
                         f"record: {e}") from None
    if record.previous != frozen.origin:
        raise ChainError(f"the successor record ending {frozen.origin} names "
                         f"{record.previous} as its log")
    if listed_next is None:
        raise ChainError(f"frozen log {frozen.origin} hands over to {record.origin}, which "
                         "the notary does not list")
    if (record.origin, record.vkeys) != (listed_next.origin, listed_next.vkeys):
        raise ChainError(
            f"frozen log {frozen.origin} hands over to {record.origin} with keys "
            f"{list(record.vkeys)}, but the notary lists {listed_next.origin} with keys "
            f"{list(listed_next.vkeys)}")
    return record


def next_key(record: SuccessorRecord, trusted: NoteVerifier) -> tuple[NoteVerifier, str]:
    """The next log's key to trust, taken from the record: of the same algorithm as the key
    trusted for the log before (a monitor that pinned ML-DSA-44 keeps to ML-DSA-44), named
    after the next log's origin."""
    for vkey in record.vkeys:
        try:
            verifier = parse_log_key(vkey)
        except NoteError as e:
            raise ChainError(f"the successor record of {record.previous} names a key that is "
                             f"not a log key: {e}") from None
        if verifier.name != record.origin:
            raise ChainError(f"the successor record of {record.previous} names a key of "
                             f"{verifier.name}, not of {record.origin}")
        if type(verifier) is type(trusted):
            return verifier, vkey
    raise ChainError(f"the successor record of {record.previous} names no "
                     f"{type(trusted).__name__} key for {record.origin}")
