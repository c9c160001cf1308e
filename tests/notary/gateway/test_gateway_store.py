"""The gateway's state file (:mod:`notary.gateway.store`): what a write leaves on disk when it
returns, seen from another connection and after the writing process is killed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from notary.gateway.store import (
    DecisionEvidence,
    GatewayStore,
    KeyClaim,
    KeyTaken,
    read_decisions,
)

REPO = Path(__file__).resolve().parents[3]


def evidence(n: int) -> DecisionEvidence:
    record = {"decision": "allow", "tool": "echo", "facts_sha256": "f" * 64,
              "policy_commitment": "c" * 64, "time": f"2026-12-07T00:00:0{n}Z",
              "salt": f"{n:032x}"}
    return DecisionEvidence(record, {"tool": "echo", "n": n}, {"id": f"receipt-{n}"})


async def saved(path: Path) -> list[dict[str, object]]:
    return [e.to_json() async for e in read_decisions(path)]


async def test_a_saved_decision_is_committed_when_save_returns(tmp_path: Path) -> None:
    """Committed, not left in an open transaction: another connection reads it at once and
    can take the write lock (a second gateway process, the durable connection)."""
    path = tmp_path / "state.db"
    store = await GatewayStore(path).open()
    try:
        await store.save_decision(evidence(1))
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # "database is locked" if a write is still open
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert await saved(path) == [evidence(1).to_json()]
        # The durable connection (a claim with its evidence) takes the write lock too.
        await store.save_decision(evidence(2), KeyClaim("key", "echo", "d" * 64, "now"))
        await store.save_decision(evidence(3))
        assert await saved(path) == [evidence(n).to_json() for n in (1, 2, 3)]
    finally:
        await store.close()


async def kill_9_once_saved(script: str) -> None:
    """Run ``script`` (a Python program that prints "saved" once its writes returned, then
    waits) and kill -9 it as soon as it has said so."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line == b"saved\n"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()


async def test_a_saved_decision_survives_kill_9(tmp_path: Path) -> None:
    """Decision evidence is durable across a crash of the gateway (synchronous=NORMAL: not
    across a power loss): once save_decision returned, kill -9 loses nothing."""
    path = tmp_path / "state.db"
    rows = json.dumps([[evidence(n).record, evidence(n).facts, evidence(n).receipt]
                       for n in (1, 2, 3)])
    script = f"""
import asyncio, sys
from pathlib import Path
from notary.gateway.store import DecisionEvidence, GatewayStore
async def main():
    store = await GatewayStore(Path({str(path)!r})).open()
    for row in {rows}:
        await store.save_decision(DecisionEvidence(*row))
    print("saved", flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""
    await kill_9_once_saved(script)
    assert await saved(path) == [evidence(n).to_json() for n in (1, 2, 3)]


def idempotency_rows(path: Path) -> list[tuple[str, str]]:
    other = sqlite3.connect(path)
    try:
        return other.execute("SELECT key, state FROM idempotency ORDER BY key").fetchall()
    finally:
        other.close()


async def test_a_claim_is_saved_with_its_decision_in_one_transaction(tmp_path: Path) -> None:
    """A non-idempotent call's key is claimed ``pending`` in the transaction that saves its
    decision: both are committed when save_decision returns; a key claimed already raises
    KeyTaken (its evidence saved all the same); a claim that fails saves no evidence either
    and leaves the write lock free."""
    path = tmp_path / "state.db"
    store = await GatewayStore(path).open()
    try:
        await store.save_decision(evidence(1), KeyClaim("K", "echo", "d" * 64, "now"))
        assert idempotency_rows(path) == [("K", "pending")]
        assert await saved(path) == [evidence(1).to_json()]
        with pytest.raises(KeyTaken):
            await store.save_decision(evidence(2), KeyClaim("K", "echo", "e" * 64, "now"))
        row = await store.lookup("K")
        assert row is not None and (row.state, row.request_sha256) == ("pending", "d" * 64)
        assert await saved(path) == [evidence(1).to_json(), evidence(2).to_json()]

        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("DROP TABLE idempotency")  # the claim's INSERT now fails
            with pytest.raises(sqlite3.OperationalError, match="no such table"):
                await store.save_decision(evidence(3), KeyClaim("L", "echo", "d" * 64, "now"))
            other.execute("BEGIN IMMEDIATE")  # "database is locked" if it were left open
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert await saved(path) == [evidence(1).to_json(), evidence(2).to_json()]
    finally:
        await store.close()


async def test_a_claim_survives_kill_9(tmp_path: Path) -> None:
    """Once save_decision with a claim returned, kill -9 loses neither the ``pending`` key nor
    its decision (synchronous=FULL: nor would a power loss), and a finished key is ``done``."""
    path = tmp_path / "state.db"
    script = f"""
import asyncio
from pathlib import Path
from notary.gateway.store import DecisionEvidence, GatewayStore, KeyClaim
async def main():
    store = await GatewayStore(Path({str(path)!r})).open()
    for n, key in enumerate(("A", "B"), 1):
        record = {json.dumps(evidence(1).record)}
        await store.save_decision(DecisionEvidence(record, {{"n": n}}, None),
                                  KeyClaim(key, "echo", "d" * 64, "now"))
    await store.finish("A", {{"content": []}})
    print("saved", flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"""
    await kill_9_once_saved(script)
    assert idempotency_rows(path) == [("A", "done"), ("B", "pending")]
    assert [e.facts async for e in read_decisions(path)] == [{"n": 1}, {"n": 2}]
