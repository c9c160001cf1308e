"""``notary monitor`` across a notary's logs: follow the chain of successor records.

The generic monitor (:mod:`ledger.monitor`) audits one log under a pinned key. A notary rolls
to a new log now and then (docs/lifecycle.md), so its monitor reads ``GET /v1/ledger``'s
``logs`` and, from the pinned log on, audits each under its ``url`` as one log is audited
(a state file per log). For each frozen log it then reads the last entry of its final
checkpoint from the tiles, with an inclusion proof to that checkpoint's root, and checks that
it is the successor record naming exactly the next listed log's origin and keys: the next log
is audited under the key taken from that record, never from the list. So one key, the first
log's, is all the out-of-band trust a monitor needs for every log a notary will ever have.

A server without ``/v1/ledger`` (a plain tlog, a mirror) is monitored as one log.
"""

from __future__ import annotations

from ledger.client.http import FetchError
from ledger.client.tiles import EntryUnproven, LogSource, proven_entry
from ledger.core.note import NoteVerifier
from ledger.monitor.core import Alarm, PollReport
from ledger.monitor.polls import LogPolls, one_log
from notary.core.log_chain import (
    ChainError,
    next_key,
    parse_log_list,
    start_of,
    successor_of,
)
from notary.core.successor import SuccessorError, decode_successor

__all__ = ["ALARM_KIND", "follow_chain"]

#: The kind of alarm (``notary_monitor_alarms_total{kind="log_chain"}``) raised when the list
#: of logs and the successor records disagree.
ALARM_KIND = "log_chain"


def _alarm(e: ChainError | str, evidence: dict[str, object] | None = None) -> Alarm:
    return Alarm(ALARM_KIND, str(e), evidence)


async def follow_chain(polls: LogPolls) -> list[tuple[str, PollReport]]:
    """The driver of ``notary monitor``: every log from the pinned one to the active one."""
    cfg = polls.config
    for attempt in range(2):
        try:
            doc = await polls.http.get_json(f"{cfg.url}/v1/ledger")
        except FetchError as e:
            if e.status == 404:
                return await one_log(polls)
            raise
        raw = doc.get("logs") if isinstance(doc, dict) else None
        if raw is None:  # a notary from before many logs: its one log is at --log
            return await one_log(polls)
        try:
            return await _walk(polls, raw, last_try=attempt == 1)
        except _RolledMeanwhile:
            continue
    raise AssertionError("unreachable")  # the second walk never raises _RolledMeanwhile


class _RolledMeanwhile(Exception):
    """The active log ended in a successor record: rolled since the list was read?"""


async def _walk(polls: LogPolls, raw: object, *, last_try: bool
                ) -> list[tuple[str, PollReport]]:
    cfg = polls.config
    try:
        logs = parse_log_list(raw, cfg.url)
        start = start_of(logs, cfg.log_verifier.name, cfg.log_vkey)
    except ChainError as e:
        raise _alarm(e, {"logs": raw}) from None
    verifier: NoteVerifier = cfg.log_verifier
    vkey = cfg.log_vkey
    reports: list[tuple[str, PollReport]] = []
    for i in range(start, len(logs)):
        listed = logs[i]
        monitor, report = await polls.poll(listed.url, verifier, vkey)
        reports.append((listed.origin, report))
        final = monitor.verified
        assert final is not None  # the poll verified it
        evidence: dict[str, object] = {
            "logs": raw, "final_checkpoint": (monitor.state.checkpoint or b"").decode()}
        if listed.state == "active":
            # A log whose last entry hands over to another is frozen, whatever the list
            # says: a list that hides the newest logs is caught here.
            if final.size and _is_successor(entry := await _last_entry(
                    monitor.source, listed.origin, final.size, final.root_hash, evidence)):
                if not last_try:
                    raise _RolledMeanwhile
                raise _alarm(f"the notary lists {listed.origin} as its active log, but its "
                             "last entry is a successor record", {**evidence,
                                                                  "last_entry": entry.hex()})
            break
        if report.size != listed.size:
            raise _alarm(f"frozen log {listed.origin} serves size {report.size}; the notary "
                         f"lists its final size as {listed.size}", evidence)
        entry = await _last_entry(monitor.source, listed.origin, final.size, final.root_hash,
                                  evidence)
        evidence["last_entry"] = entry.hex()
        try:
            record = successor_of(entry, listed, logs[i + 1] if i + 1 < len(logs) else None)
            verifier, vkey = next_key(record, verifier)
        except ChainError as e:
            raise _alarm(e, evidence) from None
    return reports


def _is_successor(entry: bytes) -> bool:
    try:
        decode_successor(entry)
    except SuccessorError:
        return False
    return True


async def _last_entry(source: LogSource, origin: str, size: int, root: bytes,
                      evidence: dict[str, object]) -> bytes:
    """The entry at ``size - 1`` of a log, read from its tiles and proven included under its
    verified checkpoint (``size``, ``root``)."""
    if size == 0:
        raise _alarm(f"frozen log {origin} is empty: it has no successor record", evidence)
    try:
        return await proven_entry(source, size - 1, size, root)
    except EntryUnproven as e:
        raise _alarm(f"{origin}: {e}", evidence) from None
