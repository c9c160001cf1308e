"""The ``ledger`` command line, run as real subprocesses against log directories in tmp_path."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
import pytest

from ledger.core.checkpoint import Checkpoint, open_checkpoint
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.note import Ed25519Signer, Ed25519Verifier, format_note, open_note, parse_note
from ledger.core.subtree_cosignature import SubtreeCosignatureVerifier
from ledger.core.tiles import tiles_for_size
from ledger.log.reader import LogReader
from ledger.storage.sqlite import SqliteStore
from tests.ledger.cli.command import ORIGIN, fails, ledger, lines, ok
from tests.tamper import flip_tile_bit as corrupt
from tests.waiting import wait_until


def indexes(out: str) -> list[int]:
    return [int(line) for line in out.splitlines()]


async def read_log(directory: Path) -> tuple[int, list[bytes]]:
    """The committed size and every entry, read straight from the store."""
    store = await SqliteStore.open(directory / "log.db")
    try:
        rec = await store.latest()
        assert rec is not None
        entries = await LogReader(store).entries(0, rec.size) if rec.size else []
        return rec.size, entries
    finally:
        await store.close()


def holds_flock(pid: int, path: Path) -> bool:
    """Whether process ``pid`` holds a ``flock`` on ``path`` (Linux's /proc/locks: a writer
    holds the writer queue's lock file while it waits for SQLite's write lock)."""
    if not path.exists():
        return False
    st = path.stat()
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()  # "1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF"
        if fields[1:2] == ["FLOCK"] and fields[4:6] == [str(pid), where]:
            return True
    return False


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    d = tmp_path / "log"
    ok(ledger("init", d, "--origin", ORIGIN))
    return d



@contextmanager
def serving(directory: Path) -> Iterator[str]:
    """``ledger serve`` on an ephemeral loopback port; yields its URL; SIGTERM must end it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "serve", str(directory),
         "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else url
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err


async def fetch(http: aiohttp.ClientSession, url: str) -> bytes:
    async with http.get(url) as r:
        assert r.status == 200, url
        return await r.read()


async def served_checkpoint(http: aiohttp.ClientSession, url: str, directory: Path) -> Checkpoint:
    v = Ed25519Verifier.from_vkey((directory / "log.vkey").read_text().strip())
    cp, _ = open_checkpoint(await fetch(http, url + "/checkpoint"), v)
    return cp


# --- init ---------------------------------------------------------------------------------------


def test_init_creates_key_files_and_prints_the_vkey(tmp_path: Path) -> None:
    d = tmp_path / "new"
    out = ok(ledger("init", d, "--origin", ORIGIN))
    vkey = (d / "log.vkey").read_text().strip()
    assert out.strip() == vkey
    assert Ed25519Verifier.from_vkey(vkey).name == ORIGIN
    assert stat.S_IMODE((d / "log.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((d / "log.vkey").stat().st_mode) == 0o644
    signer = Ed25519Signer.from_private_key((d / "log.key").read_text().strip())
    assert signer.verifier_key_text() == vkey
    assert asyncio.run(read_log(d)) == (0, [])


def test_init_refuses_an_existing_log(logdir: Path) -> None:
    key = (logdir / "log.key").read_bytes()
    err = fails(ledger("init", logdir, "--origin", ORIGIN))
    assert "already" in err
    assert (logdir / "log.key").read_bytes() == key


def test_init_with_a_given_key(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    out = ok(ledger("init", tmp_path / "a", "--origin", ORIGIN, "--key", signer.private_key_text()))
    assert out.strip() == signer.verifier_key_text()
    out = ok(ledger("init", tmp_path / "b", "--origin", ORIGIN, "--key", "-",
                    stdin=signer.private_key_text().encode() + b"\n"))
    assert out.strip() == signer.verifier_key_text()


def test_init_refuses_a_key_named_otherwise_and_bad_origins(tmp_path: Path) -> None:
    other = Ed25519Signer.generate("example.com/other")
    err = fails(ledger("init", tmp_path / "x", "--origin", ORIGIN, "--key",
                       other.private_key_text()))
    assert "origin" in err
    assert not (tmp_path / "x" / "log.db").exists()
    assert not (tmp_path / "x" / "log.key").exists()
    fails(ledger("init", tmp_path / "y", "--origin", "has space"))
    fails(ledger("init", tmp_path / "z", "--origin", ORIGIN, "--key", "PRIVATE+KEY+junk"))


# --- add ----------------------------------------------------------------------------------------


def test_add_files_and_stdin_lines(logdir: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"\x00\x01binary\n")
    b.write_bytes(b"")
    run = ledger("add", logdir, a, b)
    assert indexes(ok(run)) == [0, 1]
    # Indexes on stdout for scripts; one summary line on stderr for people.
    assert run.stderr.decode() == f"ledger: appended 2 entries (indexes 0-1); {ORIGIN} is now " \
        "at size 2\n"
    run = ledger("add", logdir, stdin=b"one\ntwo\n\nfour")
    assert indexes(ok(run)) == [2, 3, 4, 5]
    assert "appended 4 entries (indexes 2-5)" in run.stderr.decode()
    assert ok(ledger("add", logdir, stdin=b"")) == ""
    size, entries = asyncio.run(read_log(logdir))
    assert size == 6
    assert entries == [b"\x00\x01binary\n", b"", b"one", b"two", b"", b"four"]


def test_oversize_entry_is_refused_before_anything_is_appended(
    logdir: Path, tmp_path: Path
) -> None:
    small, edge, big = tmp_path / "small", tmp_path / "edge", tmp_path / "big"
    small.write_bytes(b"ok")
    edge.write_bytes(b"e" * 65535)
    big.write_bytes(b"x" * 65536)
    err = fails(ledger("add", logdir, small, big))
    assert "65535" in err and "big" in err
    err = fails(ledger("add", logdir, stdin=b"fine\n" + b"y" * 70000 + b"\n"))
    assert "stdin line 2" in err
    assert asyncio.run(read_log(logdir)) == (0, [])
    assert indexes(ok(ledger("add", logdir, edge))) == [0]


def test_add_errors_are_clean(logdir: Path, tmp_path: Path) -> None:
    err = fails(ledger("add", logdir, tmp_path / "missing.txt"))
    assert "missing.txt" in err
    err = fails(ledger("add", tmp_path / "nolog", stdin=b"x\n"))
    assert "no log" in err
    os.chmod(logdir / "log.key", 0o644)
    err = fails(ledger("add", logdir, stdin=b"x\n"))
    assert "chmod 600" in err
    assert asyncio.run(read_log(logdir)) == (0, [])


def test_concurrent_adds_get_disjoint_indexes(logdir: Path, tmp_path: Path) -> None:
    inputs = []
    for k in range(3):
        f = tmp_path / f"in{k}"
        f.write_bytes(lines(f"p{k}", 700))
        inputs.append(f)
    procs = []
    for f in inputs:
        with f.open("rb") as fh:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "ledger.cli.main", "add", str(logdir)],
                stdin=fh, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            ))
    outs = [p.communicate(timeout=120) for p in procs]
    got: list[list[int]] = []
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err.decode()
        got.append(indexes(out.decode()))
    assert sorted(i for g in got for i in g) == list(range(2100))
    size, entries = asyncio.run(read_log(logdir))
    assert size == 2100
    for k, g in enumerate(got):
        assert [entries[i] for i in g] == lines(f"p{k}", 700).splitlines()
    ok(ledger("verify", logdir))


def test_a_second_writer_waits_then_fails_clearly(logdir: Path) -> None:
    lock = sqlite3.connect(logdir / "log.db", isolation_level=None)
    try:
        lock.execute("BEGIN IMMEDIATE")  # what a writer in another process holds
        err = fails(ledger("add", logdir, "--wait", "0.3", stdin=b"blocked\n"))
        assert "another process is writing" in err
        proc = subprocess.Popen(
            [sys.executable, "-m", "ledger.cli.main", "add", str(logdir), "--wait", "30"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None
        proc.stdin.write(b"waited\n")
        proc.stdin.close()
        wait_until(lambda: holds_flock(proc.pid, logdir / "log.db-writer.lock"),
                   "the second writer to queue for the write lock", 30)
        time.sleep(0.5)  # longer than the 0.3 s after which the first writer gave up
        assert proc.poll() is None  # still waiting for the lock
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert proc.stdout is not None and proc.stderr is not None
    out, err_b = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err_b.decode()
    assert indexes(out.decode()) == [0]
    assert asyncio.run(read_log(logdir)) == (1, [b"waited"])


# --- serve --------------------------------------------------------------------------------------


async def test_serve_shows_entries_added_by_another_process(logdir: Path) -> None:
    with serving(logdir) as url:
        async with aiohttp.ClientSession() as http:
            assert (await served_checkpoint(http, url, logdir)).size == 0
            ok(ledger("add", logdir, stdin=lines("s", 300)))
            added = time.monotonic()
            while (cp := await served_checkpoint(http, url, logdir)).size != 300:
                # The server re-reads the store every 0.2 s (Log.head); the bound is generous so
                # that a loaded CI machine cannot make this a timing test.
                assert time.monotonic() - added < 10.0, "served checkpoint did not advance"
                await asyncio.sleep(0.05)
            want = lines("s", 300).splitlines()
            assert cp.root_hash == merkle_root([leaf_hash(e) for e in want])
            bundle = await fetch(http, url + "/tile/entries/001.p/44")
            assert bundle == b"".join(len(e).to_bytes(2, "big") + e for e in want[256:])


def test_serve_stops_cleanly_on_sigint(logdir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.cli.main", "serve", str(logdir), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b"http://127.0.0.1:")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and b"Traceback" not in err


def test_serve_errors_are_clean(tmp_path: Path, logdir: Path) -> None:
    fails(ledger("serve", tmp_path / "nolog", "--listen", "127.0.0.1:0"))
    assert "--listen must be HOST:PORT, got 'nonsense'" in fails(
        ledger("serve", logdir, "--listen", "nonsense"))
    (logdir / "log.vkey").write_text(Ed25519Signer.generate(ORIGIN).verifier_key_text() + "\n")
    err = fails(ledger("serve", logdir, "--listen", "127.0.0.1:0"))
    assert "signed" in err or "verif" in err


# --- export -------------------------------------------------------------------------------------


def exported(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


async def test_export_matches_what_serve_serves(logdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "static"
    ok(ledger("add", logdir, stdin=lines("e", 600)))
    assert "600" in ok(ledger("export", logdir, out))
    files = exported(out)
    assert set(files) == {"checkpoint"} | {t.path() for t in tiles_for_size(600, entries=True)}
    assert not [p for p in out.rglob("*") if p.name.startswith(".")]  # no temp files left
    with serving(logdir) as url:
        async with aiohttp.ClientSession() as http:
            for rel, data in files.items():
                if rel != "checkpoint":
                    assert await fetch(http, f"{url}/{rel}") == data, rel
            # Both checkpoints are dual-signed: the same text and Ed25519 line (deterministic),
            # and each an ML-DSA-44 line of the log's key (timestamped, so not byte-equal).
            served = parse_note(await fetch(http, f"{url}/checkpoint"))
            ledger_info = json.loads(await fetch(http, f"{url}/v1/ledger"))
    exported_note = parse_note(files["checkpoint"])
    assert served.text == exported_note.text
    assert served.signatures[0] == exported_note.signatures[0]
    pq = SubtreeCosignatureVerifier.from_vkey(ledger_info["vkeys"][1])
    for note in (files["checkpoint"], format_note(served)):
        open_note(note, [pq])
        open_note(note, [Ed25519Verifier.from_vkey(ledger_info["vkey"])])
    assert "0 files written" in ok(ledger("export", logdir, out))

    ok(ledger("add", logdir, stdin=lines("f", 10)))
    ok(ledger("export", logdir, out))
    files2 = exported(out)
    assert set(files2) > set(files)  # old partial tiles stay for clients with old checkpoints
    assert files2["tile/0/002.p/88"] == files["tile/0/002.p/88"]
    assert b"\n610\n" in files2["checkpoint"]


def test_export_refuses_to_overwrite_different_tiles(logdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "static"
    ok(ledger("add", logdir, stdin=lines("e", 300)))
    ok(ledger("export", logdir, out))
    tile = out / "tile" / "0" / "000"
    tile.write_bytes(b"\xff" * 8192)
    err = fails(ledger("export", logdir, out))
    assert "tile/0/000" in err and "different" in err


# --- verify -------------------------------------------------------------------------------------


def test_verify_passes_on_a_good_log(logdir: Path) -> None:
    assert "ok" in ok(ledger("verify", logdir))  # the empty tree
    ok(ledger("add", logdir, stdin=lines("v", 600)))
    out = ok(ledger("verify", logdir))
    assert out.startswith("ok:") and "600" in out


@pytest.mark.parametrize(("level", "index", "offset", "message"), [
    (0, 0, 40, "tile/0/000"),  # a full hash tile, hash 1
    (0, 2, 0, "tile/0/002.p/88"),  # the partial edge tile
    (1, 0, 33, "tile/1/000"),  # a level-1 tile
    (-1, 1, 5, "tile/0/001"),  # an entry byte: its leaf no longer matches tile 0/001
])
def test_verify_finds_a_corrupted_row(
    logdir: Path, level: int, index: int, offset: int, message: str
) -> None:
    ok(ledger("add", logdir, stdin=lines("v", 600)))
    corrupt(logdir / "log.db", level, index, offset)
    err = fails(ledger("verify", logdir))
    assert "FAILED" in err and message in err


def test_verify_checks_the_checkpoint_signature(logdir: Path) -> None:
    ok(ledger("add", logdir, stdin=lines("v", 3)))
    (logdir / "log.vkey").write_text(Ed25519Signer.generate(ORIGIN).verifier_key_text() + "\n")
    err = fails(ledger("verify", logdir))
    assert "checkpoint" in err


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """`ledger add DIR < lines | head -1`: the reader is gone; the entries are added, and the
    command ends with the shell's SIGPIPE status (141), never a traceback."""
    ok(ledger("init", tmp_path / "log", "--origin", ORIGIN))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    for n, unbuffered in enumerate(("1", None)):  # a failing write, then a failing final flush
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            run = subprocess.run([sys.executable, "-m", "ledger.cli.main", "add",
                                  str(tmp_path / "log")], input=b"a\nb\n", stdout=write_end,
                                 stderr=subprocess.PIPE, timeout=60, check=False,
                                 env=env | ({"PYTHONUNBUFFERED": unbuffered} if unbuffered else {}))
        finally:
            os.close(write_end)
        assert run.returncode == 141, run.stderr
        assert b"Traceback" not in run.stderr and b"BrokenPipe" not in run.stderr, run.stderr
        assert f"size {2 * (n + 1)}:" in ok(ledger("verify", tmp_path / "log"))  # added
