"""The emergency roll (issue 33, item 6): ``notary log roll --reason compromised`` retires the
keys of every log derived from ``log.key`` and starts the next log under a new root key, so
that whoever holds the old ``log.key`` can sign for no log that takes entries; a kill at any
point loses no key; a process whose ``log.key`` is the old root refuses to sign."""

from __future__ import annotations

import asyncio
import json
import shutil
import stat
import sys
from pathlib import Path

import pytest

from ledger.core.checkpoint import open_checkpoint
from ledger.core.cosignature import parse_log_key
from ledger.core.tlog_proof import decode_proof_bundle
from notary.serving.config import ConfigError
from notary.serving.keys import Paths, load_log_key
from notary.serving.lifecycle import (
    LogBook,
    RootKeyMismatch,
    key_status,
    log_signer,
    log_vkeys,
    own_signer,
    roll,
)
from notary.serving.root_key import emergency_roll
from notary.serving.startup import open_notary
from notary.store.sqlite import SqliteNotaryStore
from tests.notary_server import capture_cli, headless_notary, headless_settings, issue


async def test_a_compromised_roll_makes_a_new_root_and_retires_the_old_logs(
        shared: str, tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    async with headless_notary(tmp_path, shared) as notary:
        await issue(notary, 1)
        await notary.sequencer.close()
        store = notary.store
        old = load_log_key(paths)
        rolled = await roll(store, old)  # an ordinary roll first: log 1 is still old's
        rolled = await emergency_roll(store, paths, old)
        new = load_log_key(paths)
        # A new root, 0600, the old one kept aside; log 2's keys come from the new one only.
        assert new.seed != old.seed and new.name == old.name
        assert stat.S_IMODE(paths.log_key.stat().st_mode) == 0o600
        assert load_log_key_text(paths.retired_log_key(0)) == old.private_key_text()
        assert not paths.log_key_next.exists()
        assert rolled.active.n == 2
        assert rolled.active.vkeys == log_vkeys(log_signer(new, rolled.active))
        assert own_signer(old, rolled.active) is None
        # The frozen log's final checkpoint is stored signed with both of its keys: nothing
        # signs for it again.
        final = await store.for_log(1).latest()
        assert final is not None
        for vkey in rolled.frozen.vkeys:
            assert open_checkpoint(final.note, parse_log_key(vkey))[0].size == 1
        # The registry: logs 0 and 1 retired by log 1's compromised roll, log 2 of root 1.
        logs = await store.logs()
        status = key_status(logs)
        assert [s["key_generation"] for s in status] == [0, 0, 1]
        retired = status[0]["retired"]
        assert isinstance(retired, dict) and retired["by"] == rolled.frozen.origin
        assert retired["reason"] == "compromised" and status[1]["retired"] == retired
        assert status[2]["retired"] is None
        # A process that still holds the old root refuses to sign for log 2, and says what
        # to copy where; so does a roll with it.
        with pytest.raises(RootKeyMismatch, match=r"Copy log\.key from the data directory"):
            await LogBook(store, old).signer(2)
        with pytest.raises(RootKeyMismatch):
            await roll(store, old)
        # The new root rolls on: log 3 of root 1, and logs 0 and 1 stay retired.
        third = await roll(store, new)
        assert third.active.vkeys == log_vkeys(log_signer(new, third.active))
        assert [s["retired"] is None for s in key_status(await store.logs())] == [
            False, False, True, True]


def load_log_key_text(path: Path) -> str:
    return path.read_text().strip()


async def test_a_frontend_with_the_old_root_refuses_to_start(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    async with headless_notary(tmp_path, "sqlite") as notary:
        await issue(notary, 1)
        await notary.sequencer.close()
        await emergency_roll(notary.store, paths, load_log_key(paths))
    new_text = paths.log_key.read_text()
    shutil.copyfile(paths.retired_log_key(0), paths.log_key)  # as a frontend not updated
    with pytest.raises(ConfigError, match=r"does not make the keys of the active log 1 .*Copy "
                                          r"log.key from the data directory"):
        await open_notary(headless_settings(tmp_path, "sqlite"))
    paths.log_key.write_text(new_text)
    async with headless_notary(tmp_path, "sqlite") as notary:
        receipt, _ = await issue(notary, 2)
        assert receipt.origin == (await notary.store.logs())[1].origin


async def test_a_running_notary_follows_a_compromised_roll_made_beside_it(tmp_path: Path
                                                                          ) -> None:
    """The roll replaced log.key in this data directory: the running writer reads the new
    root when it moves to the new log, and signs there with its key."""
    paths = Paths(tmp_path)
    async with headless_notary(tmp_path, "sqlite") as notary:
        await issue(notary, 1)
        other = await SqliteNotaryStore.open(paths.db)
        try:
            rolled = await emergency_roll(other, paths, load_log_key(paths))
        finally:
            await other.close()
        receipt, _ = await issue(notary, 2)
        assert receipt.origin == rolled.active.origin and receipt.index == 0
        note = decode_proof_bundle(receipt.proof.encode()).checkpoint  # type: ignore[union-attr]
        key = parse_log_key(rolled.active.vkeys[0])
        assert open_checkpoint(note, key)[0].size == 1


@pytest.mark.parametrize("step", ["write", "install"])
async def test_a_compromised_roll_killed_midway_loses_no_key(shared: str, step: str,
                                                             tmp_path: Path) -> None:
    """SIGKILL inside the roll's transaction (the new root written, nothing committed), or
    after it committed and before log.key was replaced: either way a notary starts on the
    data directory and signs for the active log."""
    paths = Paths(tmp_path)
    async with headless_notary(tmp_path, shared) as notary:
        await issue(notary, 1)
    old = paths.log_key.read_text()
    database = "" if shared == "sqlite" else shared
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.roll_child", str(tmp_path), database, step, "compromised",
        stdout=asyncio.subprocess.PIPE, cwd=Path(__file__).parents[3])
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), 60)
    assert line == b"paused\n", line
    child.kill()
    await child.wait()
    assert paths.log_key.read_text() == old and paths.log_key_next.exists()
    written = paths.log_key_next.read_text()
    async with headless_notary(tmp_path, shared) as notary:
        logs = await notary.store.logs()
        receipt, _ = await issue(notary, 2)
        if step == "write":  # nothing committed: log 0 goes on under the old root
            assert logs == [] and receipt.origin == load_log_key(paths).name
            assert paths.log_key.read_text() == old
            await notary.sequencer.close()
            rolled = await emergency_roll(notary.store, paths, load_log_key(paths))
            assert paths.log_key.read_text() == written  # the root written before is used
        else:  # committed: the start finished installing the new root
            assert [r.reason for r in logs] == ["compromised", None]
            assert paths.log_key.read_text() == written
            assert paths.retired_log_key(0).read_text() == old
            rolled_active = logs[1]
            assert receipt.origin == rolled_active.origin
            rolled = None
    assert not paths.log_key_next.exists()
    if rolled is not None:
        assert own_signer(load_log_key(paths), rolled.active) is not None


async def test_the_commands_roll_for_compromise_and_list_retired_keys(tmp_path: Path) -> None:
    async with headless_notary(tmp_path, "sqlite") as notary:
        await issue(notary, 1)
    old = Paths(tmp_path).log_key.read_text()
    code, out, err = await capture_cli("log", "roll", "--data", str(tmp_path), "--reason",
                                       "compromised")
    assert code == 0, err
    assert "retired" in out and "Copy" in out
    assert Paths(tmp_path).log_key.read_text() != old
    code, out, err = await capture_cli("log", "list", "--data", str(tmp_path), "--json")
    assert code == 0, err
    logs = json.loads(out)["logs"]
    assert [(g["key_generation"], g["retired"] is None) for g in logs] == [(0, False), (1, True)]
    assert logs[0]["retired"]["by"] == logs[0]["origin"]
    code, out, err = await capture_cli("log", "list", "--data", str(tmp_path))
    assert code == 0, err
    assert "KEYS RETIRED" in out.splitlines()[0] and "RETIRED" not in out.splitlines()[1]
    # `keys list` still shows log 0's keys (log.vkey), not the new root's, which is no log's
    code, out, err = await capture_cli("keys", "list", "--data", str(tmp_path), "--json")
    assert code == 0, err
    assert [k["vkey"] for k in json.loads(out)["log_keys"]] == logs[0]["vkeys"]
    assert logs[0]["vkeys"][0] == Paths(tmp_path).log_vkey.read_text().strip()


async def test_a_frontend_on_another_machine_refuses_until_it_has_the_new_root(
        pg_url: str, tmp_path: Path) -> None:
    """Two PostgreSQL frontends with data directories of their own: the compromised roll made
    in A's replaces A's log.key; B, still holding the old root, refuses to sign (its commits
    fail, naming the file to copy) until the new log.key is copied into its directory."""
    a, b = tmp_path / "a", tmp_path / "b"
    async with headless_notary(a, pg_url) as first:
        await issue(first, 1)
    b.mkdir(mode=0o700)
    for name in ("log.key", "log.vkey"):
        shutil.copy2(a / name, b / name)
    async with headless_notary(b, pg_url) as other:
        await issue(other, 2)
        rolled = await emergency_roll(other.store, Paths(a), load_log_key(Paths(a)))
        with pytest.raises(RootKeyMismatch, match=rf"Copy log\.key .* to {b}/log\.key"):
            await issue(other, 3)
        shutil.copy2(a / "log.key", b / "log.key")
        receipt, _ = await issue(other, 3)
        assert receipt.origin == rolled.active.origin
