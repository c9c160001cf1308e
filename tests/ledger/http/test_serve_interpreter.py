"""The server tunes the interpreter once before it serves: its startup heap frozen, so full
collections no longer walk it, and the GIL's switch interval shortened, so that its database
and signing threads get the GIL back without waiting out Python's default 5 ms."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys

from aiohttp import web

from ledger.http.run import SWITCH_INTERVAL, freeze_startup_heap, serve_until_signalled


def test_the_startup_heap_is_frozen_and_what_comes_later_is_still_collected() -> None:
    try:
        freeze_startup_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # the modules and objects of this process
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # a new cycle is still found and freed
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_serving_process_has_the_shorter_switch_interval() -> None:
    before = sys.getswitchinterval()
    seen: list[float] = []

    def announce(url: str) -> None:
        seen.append(sys.getswitchinterval())
        os.kill(os.getpid(), signal.SIGTERM)  # the server's own handler stops it

    try:
        asyncio.run(serve_until_signalled(web.Application(), "127.0.0.1", 0, announce,
                                          shutdown_timeout=1))
    finally:
        sys.setswitchinterval(before)
        gc.unfreeze()
    assert seen == [SWITCH_INTERVAL]
