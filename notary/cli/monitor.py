"""``notary monitor``: the ledger's monitor, which can also watch the server names a notary
issues receipts for (:func:`notary.operator.watch_server.server_filter`) and follows a
notary's chain of logs (:func:`notary.operator.chain_monitor.follow_chain`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.cli import monitor

if TYPE_CHECKING:
    from ledger.monitor.core import EntryFilter, PollReport
    from ledger.monitor.polls import LogPolls

LOG_HELP = ("the notary's base URL: every log it lists in /v1/ledger is audited, from the log "
            "of --vkey on, each next log under the key its predecessor's successor record names")


def _server_filter(names: Sequence[str]) -> EntryFilter:
    # deferred: the entry decoder (cbor2) and structlog, only to watch server names
    from notary.operator.watch_server import server_filter

    return server_filter(names)


async def _follow_chain(polls: LogPolls) -> list[tuple[str, PollReport]]:
    # deferred: the chain's HTTP reads and the successor record's decoder, not for `--help`
    from notary.operator.chain_monitor import follow_chain

    return await follow_chain(polls)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    monitor.register(subparsers, watch=_server_filter, driver=_follow_chain, log_help=LOG_HELP)
