"""``ledger add``: append files, or the lines of stdin, as entries; print each index."""

from __future__ import annotations

import argparse
import atexit
import gc
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.process.exitcodes import UsageError

if TYPE_CHECKING:
    from ledger.core.compact import BatchHashes
    from ledger.core.note import Ed25519Signer

APPEND_BATCH = 1 << 15
"""Entries committed per transaction, at most. Each commit prints its indexes, so a long ``add``
shows progress on stdout and an interrupted one has logged a known prefix. Each also costs an
fsync and a signed checkpoint whatever its size, but runs on the writer thread while the next
batch is hashed on this one, so mostly the last commit is waited for: with 32,768 entries a
commit (a 100,000-line ``add`` is 4 commits, the last of 1,696) it took 0.284 s (best) and
0.306 s (median) where 65,536 (2, the last of 34,464) took 0.302 and 0.332, and 16,384 (7)
the same as 32,768 (one run, alternating; benchmarks/docs/http_notarize.md)."""

SWITCH_INTERVAL = 0.0002
"""Seconds the thread that hashes keeps the GIL while the writer thread wants it
(``sys.setswitchinterval``; Python's default is 0.005). The writer needs it briefly before and
after each SQLite call that lets it go; at 5 ms a wait, the first commit of a 100,000-line
``add`` reached SQLite 49 ms after its batch was integrated (5 ms at 0.2 ms), and the command
took 0.317 s (best) and 0.358 s (median) against 0.302 and 0.332 (batches of 65,536)."""

APPEND_BATCH_BYTES = 32 << 20
"""Bytes of entries committed per transaction, at most: a batch's entry bundles (a copy of its
entries) are built in memory before its commit, so a batch of large files stays this size."""


HASH_STEP = 2048
"""Hashes between two turns of the event loop while the next batch is hashed (~0.7 ms)."""


def _batches(entries: list[bytes]) -> Iterator[list[bytes]]:
    """``entries`` cut into consecutive batches of at most :data:`APPEND_BATCH` entries and
    :data:`APPEND_BATCH_BYTES` bytes (an entry is far smaller than that: at least one a batch)."""
    if sum(map(len, entries)) <= APPEND_BATCH_BYTES:  # the usual case: lines, small files
        for at in range(0, len(entries), APPEND_BATCH):
            yield entries[at : at + APPEND_BATCH]
        return
    ends = list(accumulate(map(len, entries)))  # ends[i]: bytes of entries[0..i]
    at = 0
    while at < len(entries):
        before = ends[at - 1] if at else 0
        end = min(at + APPEND_BATCH, bisect_right(ends, before + APPEND_BATCH_BYTES, lo=at))
        end = max(end, at + 1)
        yield entries[at:end]
        at = end


def _read_entries(files: Sequence[str]) -> tuple[list[bytes], Callable[[int], str]]:
    """The entries, and how to name the i-th in a message (its file, or its line of stdin):
    names are only made for the few a message needs, not for every line of a large input."""
    if files:
        return [Path(name).read_bytes() for name in files], lambda i: files[i]
    lines = sys.stdin.buffer.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines, lambda i: f"stdin line {i + 1}"


_ENDINGS = [f"{i:02d}" for i in range(100)]


def _indexes_text(first: int, last: int) -> str:
    """``first`` to ``last``, one a line: what a commit prints.

    From 100 on, numbers come in runs of a hundred that share all but their last two digits:
    each run is one join of the two-digit endings (``"\n1234".join(["00", …, "99"])``), not a
    hundred ``str()`` calls (1 ms rather than 8 for 65,536 indexes)."""
    lo, hi = max(-(-first // 100), 1), (last + 1) // 100  # whole hundreds [lo, hi), from 100
    if lo >= hi:
        return "".join([f"{i}\n" for i in range(first, last + 1)])
    head = "".join([f"{i}\n" for i in range(first, lo * 100)])
    tail = "".join([f"{i}\n" for i in range(hi * 100, last + 1)])
    return head + "".join([p + ("\n" + p).join(_ENDINGS) + "\n"
                           for p in map(str, range(lo, hi))]) + tail


async def _append(directory: Path, signer: Ed25519Signer, entries: list[bytes],
                  wait: float) -> None:
    # deferred: the log, SQLite and the event loop only to append, not for `--help`
    import asyncio
    import sqlite3

    from ledger.cli.logdir import db_path
    from ledger.core.compact import batch_hashes, batch_hashes_in_steps
    from ledger.log.facade import Log
    from ledger.storage.base import StoreError
    from ledger.storage.sqlite import SqliteStore

    store = await SqliteStore.open(db_path(directory), busy_timeout=wait)
    try:
        log = await Log.open(store, signer=signer)
    except BaseException:
        await store.close()
        raise
    done = 0
    first: int | None = None
    last = 0
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        batches = list(_batches(entries))
        at = log.sequencer.state.size if log.sequencer is not None else 0
        hashes: BatchHashes | None = batch_hashes(at, batches[0])
        for i, batch in enumerate(batches):
            commit = asyncio.ensure_future(log.append_many(batch, hashes))
            at += len(batch)
            if i + 1 < len(batches):
                # The next batch's hashes, for where it should land, while this one commits:
                # in steps with a turn of the loop between them, in which this batch is
                # integrated, signed and handed to the writer thread, where its commit runs
                # (SQLite's writes and fsync let go of the GIL). If another process appends
                # meanwhile, they are for the wrong place: the writer hashes the batch again.
                for hashes in batch_hashes_in_steps(at, batches[i + 1], HASH_STEP):
                    if hashes is None:
                        await asyncio.sleep(0)
            run = await commit
            first = run.first if first is None else first
            last = run.first + run.length - 1
            sys.stdout.write(_indexes_text(run.first, last))
            sys.stdout.flush()
            done += len(batch)
        head = await log.head(0)
    except (StoreError, sqlite3.Error) as e:
        raise UsageError(f"appended {done} of {len(entries)} entries, then: {e}") from None
    finally:
        sys.setswitchinterval(interval)
        await log.close()
    # The indexes go to stdout, one a line, for scripts; the summary to stderr, for people.
    where = f"index {first}" if first == last else f"indexes {first}-{last}"
    size = f"; {log.origin} is now at size {head.size}" if head is not None else ""
    print(f"ledger: appended {done} entr{'y' if done == 1 else 'ies'} ({where}){size}",
          file=sys.stderr)


def cmd_add(args: argparse.Namespace) -> int:
    # This process ends once the entries are appended, and Python's exit scans every object it
    # still tracks for reference cycles, several times over (17-24 ms from the end of main()
    # to the exit after 100,000 lines, 6-8 ms with them frozen first). Nothing here waits on
    # that collector: the log is closed, its commits durable and stdout flushed before exit.
    atexit.register(gc.freeze)
    # deferred: the log, its key and the event loop only to append, not for `--help`
    from ledger.cli.logdir import KEY, db_path
    from ledger.core.note import Ed25519Signer
    from ledger.core.tiles import MAX_ENTRY_SIZE
    from ledger.process import event_loop
    from ledger.process.keyfile import read_secret

    directory = Path(args.dir)
    db_path(directory)
    entries, name_of = _read_entries(args.files)
    if entries and max(map(len, entries)) > MAX_ENTRY_SIZE:
        too_big = [f"{name_of(i)} is {len(e)} bytes" for i, e in enumerate(entries)
                   if len(e) > MAX_ENTRY_SIZE]
        more = f" (and {len(too_big) - 5} more)" if len(too_big) > 5 else ""
        raise UsageError(f"entries are at most {MAX_ENTRY_SIZE} bytes: {'; '.join(too_big[:5])}"
                       f"{more}; nothing was appended")
    if not entries:
        return 0
    signer = Ed25519Signer.from_private_key(read_secret(directory / KEY))
    event_loop.run(_append(directory, signer, entries, args.wait), auto=event_loop.ASYNCIO)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("add", help="append files, or stdin lines, as entries")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("files", metavar="FILE", nargs="*")
    s.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for another writer (default 10)")
    # nothing on its path logs (structlog is not even imported): no logging set-up
    s.set_defaults(func=cmd_add, structured_logs=False)
