"""``ledger``: create, append to, serve, export and audit a log kept in one directory.

A log directory holds ``log.db`` (SQLite: tiles, bundles, checkpoints), ``log.key`` (the private
signing key, mode 0600) and ``log.vkey`` (the public verifier key, for anyone). Only ``init`` and
``add`` read the private key; ``serve``, ``export`` and ``verify`` need the public key alone, so
they can run where the signing key is not. Those three also read a directory whose log lives in
another SQLite file beside ``log.vkey`` (a notary's data directory): the one file there that
holds a log's tables.

Every expected failure ends with one ``ledger: error: …`` line on stderr and a non-zero exit:
users of a command-line tool need to know what to fix, not where in the code it was noticed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from ledger.cli import mirror, monitor, witness
from ledger.cli.pipe import STDOUT_CLOSED, stdout_reader_gone
from ledger.core.note import Ed25519Signer, Ed25519Verifier, NoteError
from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
from ledger.core.tiles import MAX_ENTRY_SIZE
from ledger.http.routes import PUBLISHED_CHECKPOINT, create_ledger_app
from ledger.http.run import serve_until_signalled
from ledger.jobs.check import AuditError, audit_log
from ledger.jobs.export import ExportError, export_log
from ledger.jobs.publish import Publisher
from ledger.jobs.witnessing import (
    WitnessConfigError,
    WitnessEndpoint,
    Witnessing,
    parse_mirror_spec,
)
from ledger.log.facade import Log
from ledger.log.pq_checkpoints import PostQuantumCheckpoints
from ledger.log.sequencer import LogIntegrityError
from ledger.process import event_loop
from ledger.process.dirlock import DirectoryInUseError, ServingLock
from ledger.process.exitcodes import ExitCode, UsageError
from ledger.process.keyfile import KeyFileError, read_secret, write_secret
from ledger.process.netaddr import parse_host_port
from ledger.process.progress import progress_reporter
from ledger.process.structured_logs import configure
from ledger.process.version import package_version
from ledger.storage.base import StoreError
from ledger.storage.damage import (
    corruption_in,
    damage_message,
    describe_findings,
    integrity_errors,
)
from ledger.storage.sqlite import SqliteStore

DB, KEY, VKEY = "log.db", "log.key", "log.vkey"
APPEND_BATCH = 4096


# --- helpers ------------------------------------------------------------------------------------


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _db(directory: Path) -> Path:
    db = directory / DB
    if not db.is_file():
        raise UsageError(f"no log in {directory} (create one with: ledger init {directory} "
                       "--origin ORIGIN)")
    return db


def _holds_log(path: Path) -> bool:
    """Whether ``path`` is an SQLite file with a log's tables (a damaged one counts: opening it
    then says what is wrong)."""
    try:
        with path.open("rb") as f:
            if f.read(16) != _SQLITE_MAGIC:
                return False
    except OSError:
        return False
    try:
        conn = sqlite3.connect(path)
        try:
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return corruption_in(e) is not None
    return {"tiles", "log_state"} <= names


def _find_db(directory: Path) -> Path:
    """``log.db``, or the one SQLite file in ``directory`` that holds a log (a notary keeps its
    log in its own database file), for the commands that only read."""
    if (directory / DB).is_file() or not directory.is_dir():
        return _db(directory)
    found = [p for p in sorted(directory.iterdir()) if p.is_file() and _holds_log(p)]
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"{directory} holds several log databases "
                         f"({', '.join(p.name for p in found)}); keep one per directory")
    return _db(directory)


def _verifier(directory: Path) -> Ed25519Verifier:
    try:
        text = (directory / VKEY).read_text().strip()
    except FileNotFoundError:
        raise UsageError(f"{directory / VKEY} is missing; it holds the log's public key") from None
    try:
        return Ed25519Verifier.from_vkey(text)
    except NoteError as e:
        raise UsageError(f"{directory / VKEY}: {e}") from None


async def _open_readonly(directory: Path) -> Log:
    verifier = _verifier(directory)
    store = await SqliteStore.open(_find_db(directory))
    try:
        log = await Log.open(store, verifier=verifier)
        await log.head()  # fail now, not on the first request, if the key does not match
    except BaseException:
        await store.close()
        raise
    return log


# --- init ---------------------------------------------------------------------------------------


async def _create_db(db: Path, signer: Ed25519Signer) -> None:
    store = await SqliteStore.open(db, create=True)
    try:
        log = await Log.open(store, signer=signer)  # signs the empty tree
    except BaseException:
        await store.close()
        raise
    await log.close()


def _write_public(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    os.chmod(path, 0o644)


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    origin: str = args.origin
    if args.key is None:
        signer = Ed25519Signer.generate(origin)
    else:
        text = sys.stdin.readline().strip() if args.key == "-" else args.key.strip()
        signer = Ed25519Signer.from_private_key(text)
        if signer.name != origin:
            raise UsageError(f"the key is named {signer.name!r}, but the origin is {origin!r}; "
                           "a log key's name must be its origin")
    directory.mkdir(parents=True, exist_ok=True)
    for name in (DB, KEY, VKEY):
        if (directory / name).exists():
            raise UsageError(f"{directory} already holds a log ({name} exists); refusing to "
                           "overwrite it")
    created: list[Path] = []
    try:
        write_secret(directory / KEY, signer.private_key_text())
        created.append(directory / KEY)
        created += [directory / (DB + s) for s in ("", "-wal", "-shm")]
        event_loop.run(_create_db(directory / DB, signer))
        _write_public(directory / VKEY, signer.verifier_key_text())
    except BaseException:
        for path in created:
            path.unlink(missing_ok=True)
        raise
    print(signer.verifier_key_text())
    return 0


# --- add ----------------------------------------------------------------------------------------


def _read_entries(files: Sequence[str]) -> list[tuple[str, bytes]]:
    if files:
        return [(name, Path(name).read_bytes()) for name in files]
    data = sys.stdin.buffer.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [(f"stdin line {i + 1}", line) for i, line in enumerate(lines)]


async def _append(directory: Path, signer: Ed25519Signer, entries: list[bytes],
                  wait: float) -> None:
    store = await SqliteStore.open(_db(directory), busy_timeout=wait)
    try:
        log = await Log.open(store, signer=signer)
    except BaseException:
        await store.close()
        raise
    done = 0
    first: int | None = None
    last = 0
    try:
        for i in range(0, len(entries), APPEND_BATCH):
            batch = entries[i : i + APPEND_BATCH]
            results = await log.append_many(batch)
            for r in results:
                print(r.index)
                first = r.index if first is None else first
                last = r.index
            sys.stdout.flush()
            done += len(batch)
        head = await log.head(0)
    except (StoreError, sqlite3.Error) as e:
        raise UsageError(f"appended {done} of {len(entries)} entries, then: {e}") from None
    finally:
        await log.close()
    # The indexes go to stdout, one a line, for scripts; the summary to stderr, for people.
    where = f"index {first}" if first == last else f"indexes {first}-{last}"
    size = f"; {log.origin} is now at size {head.size}" if head is not None else ""
    print(f"ledger: appended {done} entr{'y' if done == 1 else 'ies'} ({where}){size}",
          file=sys.stderr)


def cmd_add(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    _db(directory)
    named = _read_entries(args.files)
    too_big = [f"{name} is {len(e)} bytes" for name, e in named if len(e) > MAX_ENTRY_SIZE]
    if too_big:
        more = f" (and {len(too_big) - 5} more)" if len(too_big) > 5 else ""
        raise UsageError(f"entries are at most {MAX_ENTRY_SIZE} bytes: {'; '.join(too_big[:5])}"
                       f"{more}; nothing was appended")
    if not named:
        return 0
    signer = Ed25519Signer.from_private_key(read_secret(directory / KEY))
    event_loop.run(_append(directory, signer, [e for _, e in named], args.wait))
    return 0


# --- serve --------------------------------------------------------------------------------------


def _pq_checkpoints(directory: Path) -> PostQuantumCheckpoints | None:
    """The log's ML-DSA-44 line, when its key file is in ``directory`` (the ML-DSA-44 key is
    derived from it); a directory holding only the verifier key serves Ed25519 checkpoints."""
    if not (directory / KEY).exists():
        return None
    try:
        signer = Ed25519Signer.from_private_key(read_secret(directory / KEY))
    except NoteError as e:
        raise UsageError(f"{directory / KEY}: not a log private key: {e}") from None
    return PostQuantumCheckpoints(SubtreeCosignatureSigner.derived_from(signer), signer.name)


def _mirrors(specs: Sequence[str]) -> list[WitnessEndpoint]:
    try:
        mirrors = [parse_mirror_spec(s) for s in specs]
    except WitnessConfigError as e:
        raise UsageError(f"--mirror: {e}") from None
    if len({m.verifier.public_key for m in mirrors}) != len(mirrors):
        raise UsageError("--mirror: the same mirror key is given twice")
    return mirrors


async def _serve(directory: Path, host: str, port: int, publish: Path | None,
                 pq_checkpoints: bool, mirrors: Sequence[WitnessEndpoint] = (),
                 mirror_interval: float = 2.0) -> None:
    log = await _open_readonly(directory)
    publisher = task = None
    witnessing: Witnessing | None = None
    try:  # a failure to listen is a ListenError, a usage error with its message
        pq = _pq_checkpoints(directory) if pq_checkpoints else None
        app = create_ledger_app(log, pq)
        if mirrors:
            # The witnessing job, with mirrors as its only cosigners (a majority must cosign
            # what /checkpoint serves); this process is the log's only server (ServingLock).
            witnessing = Witnessing(log, mirrors, quorum=len(mirrors) // 2 + 1,
                                    interval=mirror_interval, pq=pq)
            await witnessing.start()
            app[PUBLISHED_CHECKPOINT] = witnessing.checkpoint_for
        if publish is not None:
            publisher = Publisher(log, publish, choose=(lambda head: pq.latest(head)[1])
                                  if pq is not None else None)
            await publisher.publish()  # a directory of another log stops us before serving
            task = asyncio.create_task(publisher.run(), name="publish")
        await serve_until_signalled(app, host, port, lambda url: print(url, flush=True))
    finally:
        if witnessing is not None:
            await witnessing.close()
        if publisher is not None and task is not None:
            await publisher.stop_after_final_round(task)
        await log.close()


def cmd_serve(args: argparse.Namespace) -> int:
    host, port = parse_host_port(args.listen, what="--listen")
    mirrors = _mirrors(args.mirror or ())
    if not 0.01 <= args.mirror_interval <= 86400:
        raise UsageError("--mirror-interval: want 0.01 to 86400 seconds")
    serving = ServingLock(Path(args.dir))  # a restore must not replace what is served
    if Path(args.dir).is_dir():  # else _serve says there is no log there
        try:
            serving.take()
        except DirectoryInUseError as e:
            raise UsageError(str(e)) from None
    try:
        event_loop.run(_serve(Path(args.dir), host, port,
                              Path(args.publish) if args.publish else None,
                              args.pq_checkpoints == "on", mirrors, args.mirror_interval))
    finally:
        serving.release()
    return 0


# --- export and verify --------------------------------------------------------------------------


async def _export(directory: Path, out: Path, pq_checkpoints: bool) -> str:
    log = await _open_readonly(directory)
    update, close = progress_reporter("export", "file")
    try:
        pq = _pq_checkpoints(directory) if pq_checkpoints else None
        result = await export_log(log, out, progress=update, pq=pq)
    finally:
        close()
        await log.close()
    return (f"exported tree size {result.size} to {out}: {result.written} files written, "
            f"{result.unchanged} unchanged")


def cmd_export(args: argparse.Namespace) -> int:
    print(event_loop.run(_export(Path(args.dir), Path(args.out), args.pq_checkpoints == "on")))
    return 0


async def _verify(directory: Path) -> str:
    verifier = _verifier(directory)
    db = _find_db(directory)
    problems = await asyncio.to_thread(integrity_errors, db)
    if problems:
        raise AuditError(f"{db} is damaged: {describe_findings(problems)}")
    store = await SqliteStore.open(db)
    update, close = progress_reporter("verify", "entry")
    try:
        report = await audit_log(store, verifier, progress=update)
    except Exception as e:
        if corruption_in(e) is None:
            raise
        raise AuditError(f"{db} is damaged: {corruption_in(e)}") from None
    finally:
        close()
        await store.close()
    return (f"ok: {report.origin} size {report.size}: database pages sound; {report.tiles} "
            "tiles and bundles match the entries, and the root matches the signed checkpoint")


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        print(event_loop.run(_verify(Path(args.dir))))
    except AuditError as e:
        print(f"ledger: verify FAILED: {e}. Restore the newest backup and verify it again.",
              file=sys.stderr)
        return ExitCode.CHECK_FAILED
    return ExitCode.OK


# --- entry point --------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ledger", description="A tlog-tiles transparency log.")
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    witness.register(sub)
    mirror.register(sub)
    monitor.register(sub)

    s = sub.add_parser("init", help="create a log and its signing key")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--origin", required=True, help="the log's origin line and key name")
    s.add_argument("--key", help="existing PRIVATE+KEY+… to use ('-' reads it from stdin)")
    s.set_defaults(func=cmd_init)

    s = sub.add_parser("add", help="append files, or stdin lines, as entries")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("files", metavar="FILE", nargs="*")
    s.add_argument("--wait", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for another writer (default 10)")
    s.set_defaults(func=cmd_add)

    s = sub.add_parser("serve", help="serve the tlog-tiles and JSON read API")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT")
    s.add_argument("--publish", metavar="DIR",
                   help="also keep a static tlog-tiles tree in DIR up to date as the log grows, "
                        "for any web server to serve")
    s.add_argument("--pq-checkpoints", choices=["on", "off"], default="on",
                   help="add the log's ML-DSA-44 signature (derived from DIR/log.key) to the "
                        "checkpoints served (default on, when DIR holds log.key)")
    s.add_argument("--mirror", action="append", metavar="URL=VKEY",
                   help="a C2SP tlog-mirror (submission URL and key) to push every grown "
                        "checkpoint and its entries to; /checkpoint then serves the checkpoint "
                        "a majority of mirrors cosigned (repeatable)")
    s.add_argument("--mirror-interval", type=float, default=2.0, metavar="S",
                   help="seconds between pushes of a grown tree (default 2)")
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("export", help="write the static tlog-tiles tree to a directory")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("out", metavar="OUT")
    s.add_argument("--pq-checkpoints", choices=["on", "off"], default="on",
                   help="add the log's ML-DSA-44 signature to the exported checkpoint (default "
                        "on, when DIR holds log.key)")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("verify", help="check the database pages, recompute every tile from the "
                                      "entries and compare (a notary's data directory too)")
    s.add_argument("dir", metavar="DIR")
    s.set_defaults(func=cmd_verify)
    return p


def _database(args: argparse.Namespace) -> Path | None:
    """The log database a command uses, for messages about it."""
    directory = getattr(args, "dir", None)
    if directory is None:
        return None
    try:
        return _find_db(Path(directory))
    except UsageError:
        return Path(directory) / DB


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure("json")  # structured logs on stderr; stdout carries only results
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # here, not at exit: a reader that went away is caught below
        return code
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Exception as e:
        if stdout_reader_gone(e):
            return STDOUT_CLOSED
        if corruption_in(e) is not None:  # a damaged file: no traceback, no retry
            db = _database(args)
            message = damage_message(db, e, f"ledger verify {args.dir}" if db else None)
        elif isinstance(e, (UsageError, StoreError, KeyFileError, NoteError, ExportError,
                            LogIntegrityError)):
            message = str(e)
        elif isinstance(e, sqlite3.Error):
            message = f"cannot use the log database: {e}"
        elif isinstance(e, OSError):
            message = f"{e.filename}: {e.strerror or e}" if e.filename else str(e)
        else:
            raise
    print(f"ledger: error: {message}", file=sys.stderr)
    return ExitCode.USAGE


if __name__ == "__main__":
    raise SystemExit(main())
