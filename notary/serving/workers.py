"""``notary serve --workers N``: N processes on one log behind one listening socket.

The parent binds the socket once and hands it to every worker (``pass_fds``); the kernel spreads
new connections over the workers accepting on it. Each worker is a complete ``notary serve``
on the same store: they share the log through the many-processes commit protocol (docs/design.md,
"One log, many processes"), exactly as frontends on several machines do on PostgreSQL, and on
SQLite as well (``BEGIN IMMEDIATE`` is the lock). Background jobs run in one worker at a time
(:mod:`ledger.jobs.lease`).

The parent only supervises: a worker that dies (SIGKILL, a crash) is started again after a short
back-off, and SIGTERM or SIGINT is passed to every worker, which drains and exits; the parent
exits when all have. Workers die with the parent: each asks the kernel for SIGTERM when the
process that started it ends (``PR_SET_PDEATHSIG``), so a parent killed with SIGKILL leaves no
orphans serving on, and holding, the port.

The workers keep their metrics in a directory of this run's own (:mod:`notary.http.metrics`):
made by the parent at start (0700), never shared with another service, removed at exit. A
replaced worker's counts stay in it (the service's counters never go back); its gauges go.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

import structlog
from prometheus_client.multiprocess import mark_process_dead

from ledger.process.exitcodes import ExitCode

__all__ = ["bind", "metrics_dir", "supervise"]

_log = structlog.get_logger("notary.serving.workers")

RESTART_BACKOFF = (0.5, 1.0, 2.0, 5.0)
USAGE_EXIT = int(ExitCode.USAGE)
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""Where prometheus-client keeps a process's values (multiprocess mode). It reads this when it
is first imported, so it is set in each worker's environment, not by the worker."""


def metrics_dir() -> Path | None:
    """In a worker: the directory of the service's metrics (else None)."""
    value = os.environ.get(METRICS_DIR_ENV)
    return Path(value) if value else None


def _die_with(parent: int) -> Callable[[], None] | None:
    """What a worker runs between fork and exec (Linux): SIGTERM to it when ``parent`` ends,
    and exit at once if it already has (it died before the request was made)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded now: the child only calls it

    def child() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return child


def bind(host: str, port: int) -> socket.socket:
    """The one listening socket every worker accepts on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=1024)
    sock.set_inheritable(True)
    return sock


def supervise(sock: socket.socket, workers: int, argv: Sequence[str]) -> int:
    """Run ``workers`` copies of ``notary ARGV --listen-fd FD`` until signalled; exit status 0
    after a clean stop."""
    shared = tempfile.mkdtemp(prefix="notary-metrics-")  # 0700, this run's alone
    try:
        return _supervise(sock, workers, argv, shared)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _supervise(sock: socket.socket, workers: int, argv: Sequence[str], shared: str) -> int:
    fd = sock.fileno()
    env = {**os.environ, METRICS_DIR_ENV: shared}
    cmd = [sys.executable, "-m", "notary.cli.main", *argv, "--workers", "1",
           "--listen-fd", str(fd)]
    procs: dict[int, subprocess.Popen[bytes]] = {}
    die_with_parent = _die_with(os.getpid())
    restarts: dict[int, int] = {}
    stopping = False
    failed = False

    def start(slot: int) -> None:
        procs[slot] = subprocess.Popen(cmd, pass_fds=(fd,), stdin=subprocess.DEVNULL, env=env,
                                       preexec_fn=die_with_parent)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for slot in range(workers):
        start(slot)
    while True:
        time.sleep(0.1)
        if stopping:
            if all(p.poll() is not None for p in procs.values()):
                break
            continue
        for slot, p in list(procs.items()):
            code = p.poll()
            if code is None:
                continue
            if code == USAGE_EXIT:  # a setting it refused: every restart would fail the same way
                on_signal(signal.SIGTERM, None)
                failed = True
                break
            mark_process_dead(p.pid, shared)  # type: ignore[no-untyped-call]  # counts stay
            n = restarts.get(slot, 0)
            _log.warning("worker_exited", worker=slot, pid=p.pid, code=code, restarts=n)
            time.sleep(RESTART_BACKOFF[min(n, len(RESTART_BACKOFF) - 1)])
            restarts[slot] = n + 1
            if not stopping:
                start(slot)
    sock.close()
    if failed:
        return USAGE_EXIT
    codes = [p.returncode for p in procs.values()]
    return 0 if all(c in (0, -signal.SIGTERM) for c in codes) else 1
