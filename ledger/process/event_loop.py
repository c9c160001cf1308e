"""The event loop every command runs on: uvloop where it is installed, else asyncio's own.

The choice is made here and nowhere else. Every server (``notary serve`` and its workers,
``ledger serve``, the witness, the mirror, ``notary gateway``, ``notary mcp``) and every command
that runs a coroutine does so through :func:`run`. uvloop runs asyncio's API on libuv, whose
transports and timers cost less CPU per request than the standard loop's. It does not build
everywhere (Windows, PyPy), so asyncio's loop stays the fallback, and either can be forced with
``LEDGER_EVENT_LOOP`` (to compare the two on a benchmark, or to rule the loop out when something
misbehaves).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from ledger.process.exitcodes import UsageError

__all__ = ["ASYNCIO", "ENV_VAR", "UVLOOP", "chosen", "loop_name", "run"]

ENV_VAR = "LEDGER_EVENT_LOOP"
UVLOOP = "uvloop"
ASYNCIO = "asyncio"
AUTO = "auto"  # the same as unset: uvloop if installed

_T = TypeVar("_T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def _uvloop_factory() -> LoopFactory | None:
    """uvloop's loop constructor, or None where uvloop is not installed."""
    try:
        import uvloop  # deferred: optional (absent where it does not build)
    except ImportError:
        return None
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def chosen(environ: Mapping[str, str] = os.environ, auto: str = UVLOOP) -> str:
    """The loop :func:`run` will use: ``LEDGER_EVENT_LOOP`` when set, else ``auto``: uvloop if
    installed, or asyncio's.

    An unknown value, or ``uvloop`` where it is not installed, is a :class:`UsageError`: a
    forced choice that silently fell back would make a comparison of the two loops a lie.
    """
    wanted = environ.get(ENV_VAR, "") or AUTO
    if wanted not in (AUTO, UVLOOP, ASYNCIO):
        raise UsageError(f"{ENV_VAR}={wanted!r}: want {UVLOOP}, {ASYNCIO} or {AUTO} "
                         "(unset: uvloop where it is installed)")
    if wanted == ASYNCIO or (wanted == AUTO and auto == ASYNCIO):
        return ASYNCIO
    if _uvloop_factory() is None:
        if wanted == UVLOOP:
            raise UsageError(f"{ENV_VAR}={UVLOOP}, but uvloop is not installed here (pip "
                             f"install uvloop; it builds for CPython on Linux and macOS), or "
                             f"set {ENV_VAR}={ASYNCIO}")
        return ASYNCIO
    return UVLOOP


def run(main: Coroutine[Any, Any, _T], *, auto: str = UVLOOP) -> _T:
    """Run ``main`` to completion on a new loop of the :func:`chosen` kind, as ``asyncio.run``
    does (the loop is closed, its async generators and default executor shut down after).

    ``auto``: the loop unless ``LEDGER_EVENT_LOOP`` says: :data:`ASYNCIO` for a command that
    serves no connection and exits (``ledger add``), where importing uvloop (~5 ms) costs
    more than its loop saves."""
    try:
        factory = _uvloop_factory() if chosen(auto=auto) == UVLOOP else None
    except UsageError:
        main.close()  # never awaited: no "coroutine was never awaited" warning on top
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: the kind of the running loop, for the start-up log line."""
    module = type(asyncio.get_running_loop()).__module__
    return UVLOOP if module.partition(".")[0] == UVLOOP else ASYNCIO
