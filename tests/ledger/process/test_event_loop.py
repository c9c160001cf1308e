"""The choice of event loop: uvloop unless told otherwise, asyncio's loop where uvloop is missing,
and a forced choice that cannot be honoured refused with a message that says what to do."""

from __future__ import annotations

import asyncio
import inspect
import sys

import pytest
import uvloop

from ledger.process import event_loop
from ledger.process.event_loop import ASYNCIO, ENV_VAR, UVLOOP, chosen, loop_name
from ledger.process.exitcodes import UsageError


@pytest.fixture
def without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    """As where uvloop is not installed: ``import uvloop`` raises ImportError."""
    monkeypatch.setitem(sys.modules, "uvloop", None)


@pytest.mark.parametrize(("value", "expected"), [
    (None, UVLOOP), ("", UVLOOP), ("auto", UVLOOP), ("uvloop", UVLOOP), ("asyncio", ASYNCIO),
])
def test_uvloop_unless_asyncio_is_asked_for(value: str | None, expected: str) -> None:
    assert chosen({} if value is None else {ENV_VAR: value}) == expected


@pytest.mark.parametrize("value", ["UVLOOP", "trio", "uvloop ", "default", "0"])
def test_an_unknown_value_is_refused_with_the_choices(value: str) -> None:
    with pytest.raises(UsageError) as e:
        chosen({ENV_VAR: value})
    assert f"{ENV_VAR}={value!r}" in str(e.value)
    assert "uvloop, asyncio or auto" in str(e.value)


@pytest.mark.usefixtures("without_uvloop")
def test_without_uvloop_the_standard_loop_is_used_unless_uvloop_is_forced() -> None:
    assert chosen({}) == ASYNCIO
    assert chosen({ENV_VAR: "auto"}) == ASYNCIO
    assert chosen({ENV_VAR: "asyncio"}) == ASYNCIO
    with pytest.raises(UsageError) as e:
        chosen({ENV_VAR: "uvloop"})
    assert "uvloop is not installed" in str(e.value) and f"{ENV_VAR}=asyncio" in str(e.value)


async def _running() -> tuple[str, asyncio.AbstractEventLoop]:
    return loop_name(), asyncio.get_running_loop()


@pytest.mark.parametrize(("value", "name", "kind"), [
    ("uvloop", UVLOOP, uvloop.Loop), ("asyncio", ASYNCIO, asyncio.BaseEventLoop),
])
def test_run_runs_on_the_chosen_loop_and_closes_it(monkeypatch: pytest.MonkeyPatch, value: str,
                                                    name: str, kind: type) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    reported, loop = event_loop.run(_running())
    assert reported == name
    assert isinstance(loop, kind)
    assert loop.is_closed()


@pytest.mark.usefixtures("without_uvloop")
def test_run_falls_back_to_the_standard_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    reported, loop = event_loop.run(_running())
    assert reported == ASYNCIO and not isinstance(loop, uvloop.Loop)


def test_run_refuses_before_running_and_closes_the_coroutine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "libuv")
    main = _running()
    with pytest.raises(UsageError):
        event_loop.run(main)
    assert inspect.getcoroutinestate(main) == inspect.CORO_CLOSED
