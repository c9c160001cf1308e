"""How ``ledger add`` cuts its input into commits (:func:`ledger.cli.add._batches`)."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.cli import add
from ledger.cli.main import main
from ledger.core import compact
from ledger.core.checkpoint import open_checkpoint
from ledger.core.hashing import leaf_hash, merkle_root
from ledger.core.note import Ed25519Verifier
from ledger.log.reader import LogReader
from ledger.storage.sqlite import SqliteStore


def test_lines_go_in_few_large_commits() -> None:
    """100,000 short lines are four commits (each an fsync and a signed checkpoint), in order."""
    entries = [b"%064x" % i for i in range(100_000)]
    batches = list(add._batches(entries))
    assert [len(b) for b in batches] == [add.APPEND_BATCH] * 3 + [100_000 - 3 * add.APPEND_BATCH]
    assert [e for b in batches for e in b] == entries


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 40])
def test_large_entries_are_cut_by_bytes_too(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Entries that outweigh :data:`APPEND_BATCH_BYTES` are cut by size: every batch holds at
    most that many bytes (one entry larger than it goes alone), none is empty, none could have
    taken the next entry, and together they are the input in order."""
    monkeypatch.setattr(add, "APPEND_BATCH", 8)
    monkeypatch.setattr(add, "APPEND_BATCH_BYTES", 100)
    entries = [bytes([i]) * (i * 7 % 45) for i in range(count)]
    entries[count // 2 : count // 2 + 1] = [b"x" * 150] if count else []  # alone in its batch
    batches = list(add._batches(entries))
    assert [e for b in batches for e in b] == entries
    for i, batch in enumerate(batches):
        assert 0 < len(batch) <= 8
        assert sum(map(len, batch)) <= 100 or len(batch) == 1
        if i + 1 < len(batches) and len(batch) < 8:  # cut by size: the next one did not fit
            assert sum(map(len, batch)) + len(batches[i + 1][0]) > 100


@pytest.mark.parametrize(("first", "last"), [
    (0, 0), (0, 99), (0, 100), (3, 17), (99, 100), (150, 1050), (0, 65_535), (65_536, 99_999),
    (12_345, 12_345), (7, 123_456)])
def test_indexes_are_printed_one_a_line(first: int, last: int) -> None:
    assert add._indexes_text(first, last) == "".join(f"{i}\n" for i in range(first, last + 1))


def test_each_batch_is_hashed_while_the_last_one_commits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Batches after the first are hashed beforehand, in steps, for where they will land, and
    the writer uses those hashes (it hashes nothing itself): the entries, their indexes and
    the tree are those of one batch."""
    log = tmp_path / "log"
    assert main(["init", str(log), "--origin", "example.com/add-batches"]) == 0
    monkeypatch.setattr(add, "APPEND_BATCH", 300)
    monkeypatch.setattr(add, "HASH_STEP", 64)
    made: list[tuple[int, int]] = []
    plain = compact.batch_hashes

    def counted(start: int, entries: list[bytes]) -> compact.BatchHashes:
        made.append((start, len(entries)))
        return plain(start, entries)

    monkeypatch.setattr(compact, "batch_hashes", counted)
    entries = [b"line %d" % i for i in range(1000)]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(entries) + b"\n")))
    capsys.readouterr()
    interval = sys.getswitchinterval()
    assert main(["add", str(log)]) == 0
    assert sys.getswitchinterval() == interval  # lowered while it ran (SWITCH_INTERVAL) only
    assert capsys.readouterr().out == "".join(f"{i}\n" for i in range(1000))
    assert made == [(0, 300)]  # the first batch, by the command; then none by the writer
    assert asyncio.run(_root_and_entries(log)) == (
        merkle_root([leaf_hash(e) for e in entries]), entries)


async def _root_and_entries(log: Path) -> tuple[bytes, list[bytes]]:
    store = await SqliteStore.open(log / "log.db")
    try:
        rec = await store.latest()
        assert rec is not None
        vkey = (log / "log.vkey").read_text().strip()
        cp, _ = open_checkpoint(rec.note, Ed25519Verifier.from_vkey(vkey))
        return cp.root_hash, await LogReader(store).entries(0, rec.size)
    finally:
        await store.close()


def test_the_process_exits_without_scanning_its_objects_for_cycles(tmp_path: Path) -> None:
    """Once ``ledger add`` is done, its objects are frozen before Python's exit collects
    garbage (what an ``atexit`` hook registered before it sees, as it runs after it)."""
    log = tmp_path / "log"
    assert main(["init", str(log), "--origin", "example.com/add-exit"]) == 0
    probe = ("import atexit, gc, sys; "
             "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, "
             "file=sys.stderr)); from ledger.cli.main import main; sys.exit(main(sys.argv[1:]))")
    run = subprocess.run([sys.executable, "-c", probe, "add", str(log)], input=b"a\nb\n",
                         capture_output=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [b"0", b"1"]
    assert run.stderr.splitlines()[-1] == b"frozen True"
