"""``notary serve``: run the notary HTTP service.

Its flags are the settings table's (``notary.serving.config.SETTINGS``), one per setting that
has one, so ``--help``, the environment, the TOML file and docs/configuration.md never disagree.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import sys
from pathlib import Path

from ledger.process.dirlock import DirectoryInUseError, ServingLock
from ledger.process.exitcodes import UsageError
from notary.cli import store_args
from notary.core.databases import MEMORY, is_memory
from notary.serving.commands import store_command
from notary.serving.config import SETTINGS

__all__ = ["command_name", "register"]


def cmd_serve(args: argparse.Namespace) -> int:
    # deferred: the HTTP server, the store, logging and tracing, not for `serve --help`
    from ledger.http.run import serve_until_signalled
    from ledger.http.server import ServerLimits
    from ledger.process import event_loop, tracing
    from ledger.process.structured_logs import configure
    from notary.http.app import create_app
    from notary.serving.startup import check_before_creating, init_data_dir
    from notary.serving.workers import bind, metrics_dir, supervise

    settings = store_args.settings(args)
    configure(settings.log_format, settings.log_level)
    tracing.setup("notary")  # before the app is made: its middlewares and hot path depend on it
    if settings.workers > 1 and is_memory(settings.database):
        raise UsageError(f"--workers needs a store the workers share; {MEMORY} is one per "
                         "process")
    worker = args.listen_fd is not None
    host, port = settings.host_port
    sock: socket.socket | None = None
    if worker:
        sock = socket.socket(fileno=args.listen_fd)
    else:
        # Everything that can fail is tried before anything is created in --data: the
        # settings, the database (and whether it already holds a log this frontend lacks the
        # key of), the port.
        event_loop.run(check_before_creating(settings))
    # settings are checked here, before any worker starts
    app = create_app(settings, shared_metrics=metrics_dir() if worker else None)
    if not worker:
        try:
            sock = bind(host, port)
        except OSError as e:
            raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    # Held while serving: `notary restore` refuses to replace a directory in use.
    serving = ServingLock(settings.data)
    if settings.data.is_dir():
        _hold(serving)
    first = None if worker else init_data_dir(settings)
    if not serving.held:
        _hold(serving)
    base = settings.base_url
    if first is not None and not first.new_log:
        print(f"Joined the log of {settings.data}/log.key with a receipt key of this "
              f"frontend's own (kid {first.kid}, 0600; back it up).")
    elif first is not None:
        print(f"Created a new notary in {settings.data}/ (keys are 0600; back them up).")
        print(f"Log verifier key:  {first.vkey}")
        print(f"Receipt keys:      {base}/.well-known/jwks.json (kid {first.kid})")
        if not is_memory(settings.database):
            program = command_name(shutil.which("notary"), sys.argv[0], Path.cwd())
            create = store_command(settings, "apikey create", "--account", "NAME",
                                   program=program)
            print(f"Create an API key: {create}")
    if is_memory(settings.database):
        print(f"The store is in memory ({MEMORY}): nothing outlives this process, and API keys "
              "can only be added in process (notary.operator.admin).")
    assert sock is not None
    if settings.workers > 1:
        print(f"Serving on {base} (listening on {host}:{port}, {settings.workers} workers)",
              flush=True)
        return supervise(sock, settings.workers, args.argv)
    limits = ServerLimits(max_connections=settings.max_connections,
                          keepalive_timeout=settings.keepalive_timeout,
                          header_timeout=settings.header_timeout,
                          body_timeout=settings.body_timeout)

    def announce(url: str) -> None:
        if not worker:
            print(f"Serving on {base} (listening on {url.split('://', 1)[1]})", flush=True)

    event_loop.run(serve_until_signalled(app, host, port, announce, limits=limits,
                                         shutdown_timeout=30, sock=sock))
    return 0


def command_name(on_path: str | None, argv0: str, cwd: Path, python: str = sys.executable
                 ) -> str:
    """How to call this command again from ``cwd``, for the lines it prints (quoted for a
    shell): ``notary`` when that is on PATH, else the path it was started by
    (``.venv/bin/notary`` from a clone: neither ./scripts/serve nor a venv not activated puts
    it on PATH), or ``PYTHON -m notary.cli.main`` when it was started so."""
    started = Path(argv0)
    if on_path is not None:
        return "notary"
    if started.name != "notary":  # `python -m notary.cli.main`
        return shlex.join([python, "-m", "notary.cli.main"])
    full = os.path.abspath(started)  # not resolved: a .venv may be a link, and is named so
    try:
        relative = os.path.relpath(full, cwd)
    except ValueError:  # another drive (Windows)
        return shlex.quote(full)
    return shlex.quote(full if relative.startswith("..") else relative)


def _hold(serving: ServingLock) -> None:
    try:
        serving.take()
    except DirectoryInUseError as e:
        raise UsageError(str(e)) from None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary serve``: the store's flags, then every other setting's, in the table's
    order."""
    p = subparsers.add_parser("serve", help="run the notary HTTP service")
    store_args.add_store_flags(p)
    for row in SETTINGS:
        if row.name not in ("data", "database"):
            store_args.add_setting_flag(p, row)
    p.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)  # a worker's socket
    p.set_defaults(func=cmd_serve)
