"""``notary monitor``: the ledger's monitor, which can also watch the server names a notary
issues receipts for (:func:`notary.operator.watch_server.server_filter`)."""

from __future__ import annotations

import argparse

from ledger.cli import monitor
from notary.operator.watch_server import server_filter


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    monitor.register(subparsers, watch=server_filter)
