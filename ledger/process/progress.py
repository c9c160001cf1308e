"""Progress of a long command on stderr: a tqdm bar on a terminal, else a line now and then.

A full check of a large log takes minutes. On a terminal a bar shows it moving; under a
scheduler or in CI (stderr not a terminal) a bar's carriage returns make a mess of logs, so one
plain line is written every ``every`` seconds instead, and one at the end.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

from tqdm import tqdm

__all__ = ["Reporter", "progress_reporter"]

Reporter = tuple[Callable[[int, int], None], Callable[[], None]]
"""(update(done, total), close())."""


def progress_reporter(what: str, unit: str, *, stream: IO[str] | None = None,
                      every: float = 10.0, clock: Callable[[], float] = time.monotonic
                      ) -> Reporter:
    """``update`` and ``close`` functions reporting ``what`` (e.g. "check") in ``unit``s."""
    out = stream if stream is not None else sys.stderr
    if out.isatty():
        bar: list[tqdm[None]] = []

        def update_bar(done: int, total: int) -> None:
            if not bar:
                bar.append(tqdm(total=total, unit=unit, unit_scale=True, file=out,
                                leave=False, desc=what))
            bar[0].update(done - bar[0].n)

        def close_bar() -> None:
            if bar:
                bar[0].close()

        return update_bar, close_bar

    last = [clock(), -1]  # time of the last line, and how far it said

    def update_lines(done: int, total: int) -> None:
        now = clock()
        if now - last[0] >= every and done != last[1]:
            _line(out, what, unit, done, total)
            last[0], last[1] = now, done

    def close_lines() -> None:
        """Nothing: the command's verdict line follows."""

    return update_lines, close_lines


def _line(out: IO[str], what: str, unit: str, done: int, total: int) -> None:
    share = f" ({100 * done // total}%)" if total else ""
    print(f"{what}: {done:,} of {total:,} {unit}s{share}", file=out, flush=True)
