"""``notary backup`` and ``notary restore`` against a running notary (subprocess, loopback).

The backup is taken while the daemon serves; restore must refuse a backup older than the log
has become (the replaced data directory's checkpoint, the witnesses' sizes, or a checkpoint
saved elsewhere), and a backup of another history at the same size; a newer or equal backup
restores, and the restored notary serves the receipts it held.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.notary_server import NotaryProcess, NotaryStartError, _child_env, free_port


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def notarize(server: NotaryProcess, key: str, n: int) -> dict[str, Any]:
    digest = f"{n:064x}"
    resp = server.post("/v1/tool-calls", api_key=key,
                       json_body={"server": "s", "tool": "t", "call_sha256": digest})
    assert resp.status == 201, resp.text
    receipt: dict[str, Any] = resp.json()
    return receipt


def test_backup_online_and_restore_refuses_an_older_backup(tmp_path: Path) -> None:
    data = tmp_path / "notary-data"
    with NotaryProcess(data) as server:
        key = server.create_api_key("b")
        early = [notarize(server, key, n) for n in range(3)]
        # The parent directory does not exist yet: the backup makes it (0700).
        dest = tmp_path / "backups" / "first"
        out = server.cli("backup", "--data", str(data), str(dest)).stdout
        assert "at size 3" in out, out
        for path in (dest / "notary.store.sqlite", dest / "log.key", dest / "backup.json"):
            assert mode(path) == 0o600, path
        assert mode(dest) == 0o700 and mode(dest / "receipt-keys") == 0o700
        assert [mode(k) for k in (dest / "receipt-keys").iterdir()] == [0o600]
        manifest = json.loads((dest / "backup.json").read_text())
        assert manifest["size"] == 3 and manifest["checkpoint"].startswith(manifest["origin"])
        # A second backup into a non-empty directory is refused.
        again = server.cli("backup", "--data", str(data), str(dest), check=False)
        assert again.returncode == 2 and "not empty" in again.stderr
        later = [notarize(server, key, n) for n in range(3, 5)]
        saved_checkpoint = tmp_path / "checkpoint-5"
        saved_checkpoint.write_bytes(server.get("/checkpoint").body)
        newer = tmp_path / "backups" / "second"
        server.cli("backup", "--data", str(data), str(newer))

    # The log moved on (size 5): the backup at size 3 is refused over the data directory ...
    refused = server.cli("restore", "--data", str(data), str(dest), check=False)
    assert refused.returncode == 2 and "moved on" in refused.stderr, refused.stderr
    assert "size 5" in refused.stderr and "size 3" in refused.stderr
    # ... and, with the data directory lost, against a checkpoint saved elsewhere.
    lost = tmp_path / "lost-and-rebuilt"
    refused = server.cli("restore", "--data", str(lost), str(dest), "--checkpoint",
                         str(saved_checkpoint), check=False)
    assert refused.returncode == 2 and "moved on" in refused.stderr
    assert not lost.exists()  # nothing was touched

    # The newer backup restores over the data directory (which is moved aside, not deleted).
    done = server.cli("restore", "--data", str(data), str(newer), "--checkpoint",
                      str(saved_checkpoint)).stdout
    assert "at size 5" in done
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("notary-data.replaced-")]
    assert len(aside) == 1 and (aside[0] / "notary.store.sqlite").exists()
    assert mode(data / "log.key") == 0o600 and mode(data) == 0o700
    with NotaryProcess(data) as restored:
        for receipt in early + later:
            got = restored.get(f"/v1/tool-calls/{receipt['id']}")
            assert got.status == 200 and got.json()["signature"] == receipt["signature"]

    # The old backup into an empty directory, with no newer evidence at all, is allowed.
    fresh = tmp_path / "fresh"
    server.cli("restore", "--data", str(fresh), str(dest))
    with NotaryProcess(fresh) as restored:
        assert restored.get(f"/v1/tool-calls/{early[0]['id']}").status == 200
        assert restored.get(f"/v1/tool-calls/{later[0]['id']}").status == 404


def test_restore_refuses_another_history_of_the_same_size(tmp_path: Path) -> None:
    data = tmp_path / "notary-data"
    with NotaryProcess(data) as server:
        key = server.create_api_key("b")
        notarize(server, key, 1)
    twin = tmp_path / "twin"
    shutil.copytree(data, twin)  # the same log key and history up to size 1 ...
    with NotaryProcess(data) as server:
        notarize(server, key, 2)
    with NotaryProcess(twin) as other:
        notarize(other, key, 3)  # ... then another entry at index 1: a fork
        fork_backup = tmp_path / "fork-backup"
        other.cli("backup", "--data", str(twin), str(fork_backup))
    refused = server.cli("restore", "--data", str(data), str(fork_backup), check=False)
    assert refused.returncode == 2 and "different history" in refused.stderr, refused.stderr
    # What the witnesses cosigned counts too (witnessing.json survives in the data directory).
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    (rebuilt / "witnessing.json").write_text(json.dumps(
        {"version": 1, "origin": "x", "witnesses": {"w.example+0000+AAAA": {"size": 9}},
         "published": None}))
    refused = server.cli("restore", "--data", str(rebuilt), str(fork_backup), check=False)
    assert refused.returncode == 2 and "cosigned size 9" in refused.stderr, refused.stderr


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def test_restore_refuses_while_a_notary_serves_the_directory(tmp_path: Path) -> None:
    """A restore under a running server would lose what it acknowledges afterwards (it goes
    on writing into the moved-aside copy) and fork the log: refused, nothing changed."""
    data = tmp_path / "notary-data"
    for workers in ("1", "2"):  # every worker holds the directory too
        shutil.rmtree(data, ignore_errors=True)
        with NotaryProcess(data, args=("--workers", workers)) as server:
            key = server.create_api_key("b")
            notarize(server, key, 1)
            backup = tmp_path / f"backup-{workers}"
            server.cli("backup", "--data", str(data), str(backup))
            before = {p.name for p in tmp_path.iterdir()}
            keys = {k: v for k, v in tree(data).items() if k.endswith("key")}
            refused = server.cli("restore", "--data", str(data), str(backup), check=False)
            assert refused.returncode == 2, refused.stderr
            assert "stop it first" in refused.stderr and "nothing was changed" in refused.stderr
            assert {p.name for p in tmp_path.iterdir()} == before  # nothing moved aside
            assert {k: v for k, v in tree(data).items() if k.endswith("key")} == keys
            notarize(server, key, 2)  # still serving the same directory
            assert server.get("/healthz").json()["size"] == 2
        # Stopped: the restore goes ahead (the backup is older, so it needs the directory
        # gone; restoring into a new directory shows the lock is gone as well).
        done = server.cli("restore", "--data", str(data), str(backup), check=False)
        assert done.returncode == 2 and "moved on" in done.stderr, done.stderr
    newer = tmp_path / "backup-newest"
    server.cli("backup", "--data", str(data), str(newer))
    server.cli("restore", "--data", str(data), str(newer))
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("notary-data.replaced-")]
    assert len(aside) == 1 and (aside[0] / "log.key").exists()
    # The moved-aside copy holds the log's private key: git never takes any of it.
    assert (aside[0] / ".gitignore").read_text().splitlines()[-1] == "*"


def test_a_server_does_not_start_while_a_restore_holds_the_directory(tmp_path: Path) -> None:
    data = tmp_path / "notary-data"
    with NotaryProcess(data):
        pass
    fd = os.open(data, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # what `notary restore` holds while it swaps
        refused = NotaryProcess(data)
        try:
            with pytest.raises(NotaryStartError, match="being replaced"):
                refused.start()
        finally:
            refused.stop()  # had it started (the bug this checks), it must not outlive the test
    finally:
        os.close(fd)


def test_migrate_refuses_while_a_notary_serves_the_directory(tmp_path: Path) -> None:
    data = tmp_path / "notary-data"
    with NotaryProcess(data) as server:
        refused = server.cli("migrate", "--data", str(data), check=False)
        assert refused.returncode == 2 and "stop it first" in refused.stderr, refused.stderr
    assert server.cli("migrate", "--data", str(data)).returncode == 0


def test_restore_refuses_while_ledger_serve_reads_the_directory(tmp_path: Path) -> None:
    data = tmp_path / "notary-data"
    with NotaryProcess(data) as server:
        backup = tmp_path / "backup"
        server.cli("backup", "--data", str(data), str(backup))
    reader = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "serve", str(data), "--listen",
         f"127.0.0.1:{free_port()}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=_child_env(None), text=True)
    try:
        assert reader.stdout is not None
        assert reader.stdout.readline().startswith("http://"), reader.stderr
        refused = server.cli("restore", "--data", str(data), str(backup), check=False)
        assert refused.returncode == 2 and "stop it first" in refused.stderr, refused.stderr
    finally:
        reader.terminate()
        reader.wait(30)
    server.cli("restore", "--data", str(data), str(backup))


def test_backup_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`notary backup DEST | head -1`: the reader is gone before the last line; the backup is
    made, and the command ends with the shell's SIGPIPE status (141), never a traceback."""
    server = NotaryProcess(tmp_path / "data")
    server.start()
    server.stop()
    buffered = {k: v for k, v in _child_env(None).items() if k != "PYTHONUNBUFFERED"}
    for n, env in enumerate((_child_env(None), buffered)):  # a failing write, a failing flush
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader went away before the first line
        try:
            res = subprocess.run([sys.executable, "-m", "notary.cli.main", "backup", "--data",
                                  str(tmp_path / "data"), str(tmp_path / f"b{n}")],
                                 stdout=write_end, stderr=subprocess.PIPE, text=True,
                                 timeout=60, env=env, stdin=subprocess.DEVNULL)
        finally:
            os.close(write_end)
        assert (res.returncode, res.stderr) == (141, ""), res.stderr
        assert (tmp_path / f"b{n}" / "backup.json").exists()


def test_a_restore_refused_while_serving_names_itself_to_run_again(tmp_path: Path) -> None:
    """Refused beside a running server, a restore says to stop it and run the restore again:
    the whole command as typed, which then runs as printed."""
    with NotaryProcess(tmp_path / "notary-data") as server:
        data, dest = server.data_dir, tmp_path / "backup"
        server.cli("backup", "--data", str(data), str(dest))
        refused = server.cli("restore", "--data", str(data), str(dest), check=False)
        assert refused.returncode == 2 and "stop it first" in refused.stderr, refused.stderr
    program, *words = shlex.split(refused.stderr.split("`")[-2])
    assert program == "notary", refused.stderr
    assert "at size 0" in server.cli(*words).stdout
