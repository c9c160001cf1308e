"""Throwaway PostgreSQL clusters on loopback, for the tests and the benchmarks.

Each cluster is ``initdb`` into a fresh directory under the system temp dir, configured to listen
on 127.0.0.1 only (no Unix socket outside its own directory), with ``trust`` authentication for
loopback: nothing but this machine can reach it, and it is deleted afterwards.

PostgreSQL refuses to run as root. When the tests run as root (as CI does), every server command
runs as the ``postgres`` user (created by Debian's ``postgresql`` package) through ``runuser``,
and the cluster directories are owned by that user. When they run as anyone else, the commands
run as that user.

A primary can be given a synchronous standby (streaming replication, ``synchronous_commit = on``
with ``synchronous_standby_names`` naming it), which is what the failover tests need: a commit the
primary acknowledged is on the standby too, so promoting the standby after a SIGKILL of the
primary loses no acknowledged write.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Cluster", "PgUnavailable", "find_pg_bin", "primary_with_standby", "start_cluster"]

HOST = "127.0.0.1"
START_TIMEOUT = 60.0


class PgUnavailable(RuntimeError):
    """The PostgreSQL server binaries (or the postgres user, when root) are missing."""


def find_pg_bin() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: ``$NOTARY_PG_BIN``, else the newest
    ``/usr/lib/postgresql/<version>/bin``, else wherever ``pg_ctl`` is on the PATH."""
    env = os.environ.get("NOTARY_PG_BIN")
    candidates = [Path(env)] if env else []
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        versions = sorted((p for p in root.iterdir() if (p / "bin" / "initdb").exists()),
                          key=lambda p: int(p.name) if p.name.isdigit() else 0, reverse=True)
        candidates += [v / "bin" for v in versions]
    which = shutil.which("pg_ctl")
    if which:
        candidates.append(Path(which).parent)
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists():
            return c
    raise PgUnavailable(
        "PostgreSQL server binaries not found (initdb, pg_ctl): install Debian's 'postgresql' "
        "package (./scripts/test does so when it runs as root) or set NOTARY_PG_BIN")


def _as_postgres() -> list[str]:
    if os.geteuid() != 0:
        return []
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        raise PgUnavailable("running as root needs the 'postgres' user (PostgreSQL refuses "
                            "root); install Debian's 'postgresql' package") from None
    return ["runuser", "-u", "postgres", "--"]


def _chown_to_postgres(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


def _free_port() -> int:
    """A loopback port free right now (PostgreSQL cannot be asked to pick one itself)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Cluster:
    """One running (or stopped) PostgreSQL cluster."""

    bin: Path
    data: Path
    port: int
    name: str
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.data.parent / f"{self.name}.log"

    @property
    def url(self) -> str:
        """A libpq URL for the ``postgres`` database as the ``postgres`` superuser."""
        return f"postgresql://postgres@{HOST}:{self.port}/postgres"

    def _run(self, args: Sequence[str], *, timeout: float = START_TIMEOUT,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*_as_postgres(), *args], capture_output=True, text=True,
                              timeout=timeout, check=check)

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        result = self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                            "-w", "-t", str(int(START_TIMEOUT)), "-o", f"-p {self.port}",
                            "start"], check=False)
        if result.returncode != 0:
            raise RuntimeError(f"cannot start PostgreSQL {self.name} on port {self.port}: "
                               f"{result.stderr.strip()}\n{self._log_tail()}")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``, or ``immediate`` for a crash-like stop)."""
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"],
                  check=False)

    def pid(self) -> int | None:
        """The postmaster's pid, or None when the server is not running."""
        pidfile = self.data / "postmaster.pid"
        try:
            return int(pidfile.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend: a machine dying, as far as clients see."""
        pid = self.pid()
        if pid is None:
            return
        # The backends are the postmaster's children; kill them too, as a lost machine would.
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        for p in [pid, *(int(c) for c in children.stdout.split())]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)

    def promote(self) -> None:
        """Promote a standby to primary and wait until it accepts writes.

        The standby inherited the old primary's ``synchronous_standby_names``; with no standby
        of its own left, every commit would wait for one forever. An operator who runs one
        standby does what this does (or has a second standby ready): turn synchronous
        replication off on the new primary until a new standby is attached.
        """
        result = self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "promote"],
                           check=False)
        if result.returncode != 0:
            raise RuntimeError(f"cannot promote {self.name}: {result.stderr.strip()}")
        self.psql("ALTER SYSTEM SET synchronous_standby_names = ''")
        self.psql("SELECT pg_reload_conf()")

    def psql(self, sql: str) -> str:
        """Run SQL with ``psql`` and return its unaligned output."""
        result = self._run([str(self.bin.parent / "bin" / "psql"), "-X", "-A", "-t", "-q",
                            "-v", "ON_ERROR_STOP=1", "-d", self.url, "-c", sql], check=False)
        if result.returncode != 0:
            raise RuntimeError(f"psql on {self.name}: {result.stderr.strip()}")
        return result.stdout.strip()

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"


def _workdir() -> Path:
    base = Path(tempfile.mkdtemp(prefix="notary-pg-"))
    base.chmod(0o755)
    _chown_to_postgres(base)
    return base


def _initdb(bin: Path, base: Path, name: str) -> Path:
    data = base / name
    result = subprocess.run(
        [*_as_postgres(), str(bin / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
         "-E", "UTF8", "--no-locale", "--no-sync"],
        capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"initdb failed: {result.stderr.strip()}")
    return data


def _configure(data: Path, lines: Sequence[str]) -> None:
    conf = data / "postgresql.conf"
    with conf.open("a") as f:
        f.write("\n# written by tests/pgcluster.py\n")
        f.write("\n".join(lines) + "\n")
    with (data / "pg_hba.conf").open("w") as f:
        f.write(f"host all all {HOST}/32 trust\nhost replication all {HOST}/32 trust\n")


_BASE_SETTINGS = (
    f"listen_addresses = '{HOST}'",
    "unix_socket_directories = ''",
    "max_connections = 200",
    "shared_buffers = 64MB",
    "fsync = on",
    "synchronous_commit = on",
    "wal_level = replica",
    "max_wal_senders = 10",
    "wal_keep_size = 256MB",
    "hot_standby = on",
    "logging_collector = off",
)


def _start_new(bin: Path, base: Path, name: str, extra: Sequence[str] = ()) -> Cluster:
    data = _initdb(bin, base, name)
    _configure(data, [*_BASE_SETTINGS, *extra])
    for _ in range(5):
        cluster = Cluster(bin, data, _free_port(), name)
        try:
            cluster.start()
            return cluster
        except RuntimeError as e:  # the probed port was taken meanwhile: try another
            error = e
    raise error


@contextlib.contextmanager
def start_cluster(name: str = "primary") -> Iterator[Cluster]:
    """One throwaway cluster, removed afterwards."""
    bin = find_pg_bin()
    base = _workdir()
    cluster = _start_new(bin, base, name)
    try:
        yield cluster
    finally:
        cluster.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def primary_with_standby() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary and a synchronous streaming standby (application name ``standby1``).

    Every commit the primary acknowledges has been flushed by the standby first
    (``synchronous_standby_names = 'standby1'``, ``synchronous_commit = on``).
    """
    bin = find_pg_bin()
    base = _workdir()
    primary = _start_new(bin, base, "primary", ["synchronous_standby_names = 'standby1'"])
    standby: Cluster | None = None
    try:
        data = base / "standby1"
        conninfo = f"host={HOST} port={primary.port} user=postgres application_name=standby1"
        result = subprocess.run(
            [*_as_postgres(), str(bin / "pg_basebackup"), "-d", conninfo, "-D", str(data),
             "-R", "-X", "stream", "-c", "fast"],
            capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"pg_basebackup failed: {result.stderr.strip()}")
        standby = Cluster(bin, data, _free_port(), "standby1")
        standby.start()
        deadline = time.monotonic() + START_TIMEOUT
        while primary.psql("SELECT sync_state FROM pg_stat_replication "
                           "WHERE application_name = 'standby1'") != "sync":
            if time.monotonic() > deadline:
                raise RuntimeError("the standby never became synchronous")
            time.sleep(0.1)
        yield primary, standby
    finally:
        for c in (standby, primary):
            if c is not None:
                c.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)


async def pg_dump_tables(url: str) -> bytes:
    """Every row of every table in the database at ``url``, as bytes (to compare two states,
    and to search a store for a secret that must never be in it)."""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        tables = [r[0] for r in await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
        out = []
        for table in tables:
            rows = await conn.fetch(f'SELECT * FROM "{table}" ORDER BY 1')
            out.append((table, [tuple(r) for r in rows]))
        return repr(out).encode()
    finally:
        await conn.close()


def new_database(cluster: Cluster) -> str:
    """A fresh, empty database in ``cluster``; its URL."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    cluster.psql(f"CREATE DATABASE {name}")
    return cluster.url.rsplit("/", 1)[0] + "/" + name
