"""``notary monitor``: the ledger's monitor, which can also watch the server names a notary
issues receipts for (:func:`notary.operator.watch_server.server_filter`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.cli import monitor

if TYPE_CHECKING:
    from ledger.monitor.core import EntryFilter


def _server_filter(names: Sequence[str]) -> EntryFilter:
    # deferred: the entry decoder (cbor2) and structlog, only to watch server names
    from notary.operator.watch_server import server_filter

    return server_filter(names)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    monitor.register(subparsers, watch=_server_filter)
