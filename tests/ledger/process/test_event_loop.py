"""The choice of event loop: uvloop unless told otherwise, asyncio's loop where uvloop is missing,
and a forced choice that cannot be honoured refused with a message that says what to do."""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import uvloop

from ledger.process import event_loop
from ledger.process.event_loop import ASYNCIO, ENV_VAR, UVLOOP, chosen, loop_name
from ledger.process.exitcodes import UsageError

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    """As where uvloop is not installed: ``import uvloop`` raises ImportError."""
    monkeypatch.setitem(sys.modules, "uvloop", None)


@pytest.mark.parametrize(("value", "expected"), [
    (None, UVLOOP), ("", UVLOOP), ("auto", UVLOOP), ("uvloop", UVLOOP), ("asyncio", ASYNCIO),
])
def test_uvloop_unless_asyncio_is_asked_for(value: str | None, expected: str) -> None:
    assert chosen({} if value is None else {ENV_VAR: value}) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, ASYNCIO), ("", ASYNCIO), ("auto", ASYNCIO), ("uvloop", UVLOOP), ("asyncio", ASYNCIO),
])
def test_a_short_command_runs_asyncio_s_loop_unless_uvloop_is_asked_for(
        value: str | None, expected: str) -> None:
    """``auto=ASYNCIO`` (``ledger add``): the standard loop when the variable does not choose."""
    assert chosen({} if value is None else {ENV_VAR: value}, auto=ASYNCIO) == expected


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


def loops_started_elsewhere(root: Path) -> list[str]:
    """``path:line`` of each call in ledger/ and notary/ that starts a loop of its own
    (``asyncio.run``, ``anyio.run``, ``uvicorn.run``, ``new_event_loop``,
    ``run_until_complete``) instead of going through :func:`ledger.process.event_loop.run`."""
    found = []
    for path in sorted([*(root / "ledger").rglob("*.py"), *(root / "notary").rglob("*.py")]):
        if path == root / "ledger" / "process" / "event_loop.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            named = owner.id if isinstance(owner, ast.Name) else ""
            if (named in ("asyncio", "anyio", "uvicorn") and node.func.attr == "run") or \
                    node.func.attr in ("new_event_loop", "run_until_complete"):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_command_runs_its_loop_through_the_chooser() -> None:
    assert loops_started_elsewhere(REPO) == []


def test_the_rule_finds_a_loop_started_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "ledger").mkdir()
    (tmp_path / "notary").mkdir()
    (tmp_path / "notary" / "cmd.py").write_text(
        "import asyncio\nimport uvicorn\n\ndef main():\n    asyncio.run(go())\n"
        "    uvicorn.run(app)\n    loop = asyncio.new_event_loop()\n")
    assert loops_started_elsewhere(tmp_path) == ["notary/cmd.py:5", "notary/cmd.py:6",
                                                 "notary/cmd.py:7"]


@pytest.mark.parametrize("value", ["bogus", "uvloop"])
def test_a_server_refuses_a_choice_it_cannot_honour_before_creating_anything(
        tmp_path: Path, value: str) -> None:
    """Forced ``uvloop`` where it is missing (a ``sitecustomize`` hides it from the child), or
    an unknown value: exit status 2 with the variable named, and no data directory."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['uvloop'] = None\n")
    env = {**os.environ, ENV_VAR: value,
           "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "notary.cli.main", "serve", "--data",
                           str(tmp_path / "data"), "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith(f"notary: error: {ENV_VAR}="), done.stderr
    assert ("uvloop is not installed" in done.stderr) == (value == "uvloop")
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "data").exists()
