"""The monitor's ``--watch-server``: pick the rs-tool-call/1 entries of some MCP servers.

The monitor is a generic tlog tool and knows nothing of entries; ``notary monitor`` hands it this
filter, which first tests for the bytes ``"server": <name>`` that every rs-tool-call/1 entry of
that server holds in its deterministic CBOR (cheap, no decoding of other servers' entries) and
only then decodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import cbor2
import structlog

from ledger.monitor.core import EntryFilter
from notary.core.entry import EntryError, decode_entry

__all__ = ["server_filter"]

_log = structlog.get_logger("notary.monitor")


def server_filter(servers: Sequence[str]) -> EntryFilter:
    """server_filter reports the entries whose ``server`` is one of ``servers``."""
    needles = [(b"\x66server" + cbor2.dumps(s), s) for s in dict.fromkeys(servers)]

    def pick(index: int, entry: bytes) -> tuple[str, dict[str, object]] | None:
        for needle, server in needles:
            if needle not in entry:
                continue
            try:
                decoded = decode_entry(entry)
            except EntryError as e:
                _log.warning("undecodable_entry", index=index, reason=str(e))
                return None
            if decoded.server != server:
                continue
            return server, {"id": decoded.id, "server": decoded.server, "tool": decoded.tool,
                            "call_sha256": decoded.call_sha256_hex,
                            "issued_at": decoded.issued_at}
        return None

    return pick
