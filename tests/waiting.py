"""Waiting in tests for what a test waits for, never for a fixed time.

A test that sleeps a second "to let the server get there" is slow when the server is quick and
flaky when the machine is loaded. Poll the condition instead, often (every 50 ms) and within a
generous bound that is a failure, not a timing assertion: in a coroutine :func:`eventually`
(the first answer that is not None) or :func:`until` (until a condition holds), and
:func:`wait_until` in plain code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["POLL", "eventually", "until", "wait_until"]

T = TypeVar("T")

POLL = 0.05
"""Seconds between two looks at the condition."""


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str,
                     timeout: float = 15.0) -> T:
    """The first answer of ``probe`` that is not None; AssertionError naming ``what`` when
    none came within ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = await probe()
        if got is not None:
            return got
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(POLL)


async def until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Return once ``condition()`` holds; AssertionError naming ``what`` when it did not
    within ``timeout`` seconds."""
    async def holds() -> bool | None:
        return True if condition() else None
    await eventually(holds, what, timeout)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    """Return once ``condition()`` holds; AssertionError naming ``what`` when it did not
    within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(POLL)
