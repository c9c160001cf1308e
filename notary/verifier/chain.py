"""Following a notary's chain of logs from a pinned log key (docs/lifecycle.md).

A notary that rolled has several logs; a verifier that pinned only the first log's key (the
one it was given out of band) verifies a receipt of a later log by following the successor
records: each frozen log's last entry, proven under its final checkpoint (verified under the
key followed so far), names the next log's origin and keys. The checks are the monitor's
(:mod:`notary.core.log_chain`): no key is ever taken from the unsigned list of logs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ledger.client.http import FetchError, HttpClient
from ledger.client.tiles import EntryUnproven, LogSource, proven_entry
from ledger.core.checkpoint import open_checkpoint
from ledger.core.cosignature import LogVerifier
from ledger.core.note import NoteError, NoteVerifier
from notary.core.log_chain import ChainError, next_key, parse_log_list, successor_of
from notary.verifier.trust import Retirement, retirements

__all__ = ["Chained", "key_by_chain", "notary_base"]

_LOG_PATH = re.compile(r"/logs/[0-9]+$")


def notary_base(log_base: str) -> str:
    """The notary's base URL from a log's (``<base>/logs/<n>`` for log n >= 1)."""
    return _LOG_PATH.sub("", log_base.rstrip("/"))


@dataclass(frozen=True)
class Chained:
    key: LogVerifier
    pinned: str  # the origin of the pinned log the chain was followed from
    steps: int  # successor records followed
    retired: dict[str, Retirement]  # the list's retired logs


async def key_by_chain(notary_url: str, pinned: Sequence[LogVerifier], origin: str,
                       fetcher: HttpClient) -> Chained:
    """The key of the log ``origin``, followed from the newest pinned log before it; raises
    :class:`ChainError` saying where the chain breaks."""
    try:
        ledger = await fetcher.get_json(notary_url + "/v1/ledger")
    except FetchError as e:
        raise ChainError(f"cannot read the notary's list of logs: {e}") from None
    logs = parse_log_list(ledger.get("logs") if isinstance(ledger, dict) else None, notary_url)
    target = next((i for i, log in enumerate(logs) if log.origin == origin), None)
    if target is None:
        raise ChainError(f"the notary at {notary_url} does not list the log {origin!r}")
    start, key = next(((i, k) for i in range(target, -1, -1) for k in pinned
                       if k.name == logs[i].origin and k.vkey in logs[i].vkeys), (None, None))
    if start is None or key is None:
        raise ChainError(f"no pinned log key is of a log before {origin!r} in the notary's list")
    verifier: NoteVerifier = key
    for j in range(start, target):
        listed = logs[j]
        source = LogSource(listed.url, fetcher, pipeline=False)
        try:
            cp, _ = open_checkpoint(await source.checkpoint(), verifier)
            if cp.size != listed.size or cp.size == 0:
                raise ChainError(f"frozen log {listed.origin} serves a checkpoint of size "
                                 f"{cp.size}; the notary lists its final size as {listed.size}")
            entry = await proven_entry(source, cp.size - 1, cp.size, cp.root_hash)
        except (FetchError, EntryUnproven) as e:
            raise ChainError(f"frozen log {listed.origin}: {e}") from None
        except NoteError as e:
            raise ChainError(f"the final checkpoint of {listed.origin} does not verify under "
                             f"the key followed to it: {e}") from None
        verifier, _ = next_key(successor_of(entry, listed, logs[j + 1]), verifier)
    assert isinstance(verifier, LogVerifier)  # parse_log_key's
    return Chained(verifier, logs[start].origin, target - start, retirements(ledger))
