"""The server freezes its startup heap, so full collections no longer walk it."""

from __future__ import annotations

import gc

from ledger.http.run import freeze_startup_heap


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
