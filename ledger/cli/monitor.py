"""``notary monitor``: watch a log's checkpoints (and optionally audit its tiles) for misbehaviour.

Modes: one poll and exit (the default, or ``--once``), or a daemon polling every ``--interval``
seconds that keeps alarming while the log misbehaves and exposes Prometheus metrics on
``--metrics HOST:PORT``.

Exit status of a one-shot run: 0 verified, 1 alarm (evidence written to ``--evidence-dir``),
2 usage or state-file error, 3 the log could not be reached or answered nonsense.
"""

# The monitor, aiohttp and the logging stack are imported by the functions that run it (each
# `# deferred:`), not for `--help`: the docstring above is the help's description.

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ledger.process.exitcodes import ExitCode, UsageError
from ledger.process.netaddr import parse_host_port

if TYPE_CHECKING:
    import asyncio

    from aiohttp import web

    from ledger.core.cosignature import LogVerifier
    from ledger.core.note import NoteVerifier
    from ledger.monitor.core import EntryFilter, MonitorConfig, MonitorMetrics, PollReport
    from ledger.monitor.polls import Driver

__all__ = ["default_state_path", "register", "run", "state_dir"]


Command = Callable[[argparse.Namespace], int]


def _read_key(text: str) -> str:
    """A key given inline, or the path of a file holding it (e.g. ``notary-data/log.vkey``)."""
    if "+" not in text and Path(text).is_file():
        return Path(text).read_text().strip()
    return text.strip()


def _log_verifier(text: str) -> tuple[LogVerifier, str]:
    """The log's key, Ed25519 or ML-DSA-44 (a post-quantum monitor pins the latter)."""
    # deferred: the key code (PyNaCl, ML-DSA), not for `--help`
    from ledger.core.cosignature import parse_log_key
    from ledger.core.note import NoteError

    vkey = _read_key(text)
    try:
        return parse_log_key(vkey), vkey
    except NoteError as e:
        raise UsageError(f"--vkey: not a log verifier key: {e}") from None


def _witness(text: str) -> NoteVerifier:
    # deferred: the key code (PyNaCl, ML-DSA), not for `--help`
    from ledger.core.cosignature import parse_verifier_key
    from ledger.core.note import NoteError

    try:
        return parse_verifier_key(_read_key(text))
    except NoteError as e:
        raise UsageError(f"--witness {text!r}: {e}") from None


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """The user's state directory for the monitor (XDG Base Directory: ``$XDG_STATE_HOME``)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "mcp-notary" / "monitor"


def default_state_path(origin: str, vkey: str, env: Mapping[str, str] | None = None) -> Path:
    """One state file per log: ``<origin, made a file name>-<key digest>.json``.

    The digest of the log's verifier key keeps two logs that share an origin (a new key after
    a fresh start) apart, so one never reads the other's checkpoint as its own.
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", origin).strip("._") or "log"
    digest = hashlib.sha256(vkey.encode()).hexdigest()[:12]
    return state_dir(env) / f"{slug[:80]}-{digest}.json"


def _config(args: argparse.Namespace) -> MonitorConfig:
    """The monitor's configuration from the command line (:class:`UsageError` for a flag
    combination that cannot work)."""
    # deferred: the monitor and the policy parser, not for `--help`
    from ledger.core.tlog_policy import TlogPolicyError, parse_tlog_policy
    from ledger.monitor.core import MonitorConfig

    verifier, vkey = _log_verifier(args.vkey)
    witnesses = tuple(_witness(w) for w in args.witness or ())
    quorum = len(witnesses) if args.quorum is None else args.quorum
    policy = None
    if args.policy:
        if witnesses or args.quorum is not None:
            raise UsageError("--policy replaces --witness and --quorum; give one or the "
                                  "other")
        try:
            policy = parse_tlog_policy(Path(args.policy).read_bytes())
        except (OSError, TlogPolicyError) as e:
            raise UsageError(f"--policy {args.policy}: {e}") from None
    if quorum < 0 or quorum > len(witnesses):
        raise UsageError(f"--quorum {quorum} needs at least that many --witness keys "
                              f"(got {len(witnesses)})")
    if args.interval is not None and args.interval <= 0:
        raise UsageError("--interval must be positive")
    watch = getattr(args, "watch_filter", None)
    entry_filter = watch(args.watch_server) if watch is not None and args.watch_server else None
    state_path = (None if args.no_state else Path(args.state).expanduser() if args.state
                  else default_state_path(verifier.name, vkey))
    return MonitorConfig(
        url=args.log, log_verifier=verifier, log_vkey=vkey, witnesses=witnesses, quorum=quorum,
        state_path=state_path,
        entry_filter=entry_filter, audit=bool(args.audit or entry_filter is not None),
        evidence_dir=Path(args.evidence_dir), timeout=args.timeout, policy=policy)


async def _serve_metrics(listen: tuple[str, int], metrics: MonitorMetrics) -> web.AppRunner:
    """``--metrics HOST:PORT``: the monitor's Prometheus metrics at ``/metrics``."""
    # deferred: aiohttp and Prometheus, not for `--help`
    from aiohttp import web
    from prometheus_client import generate_latest

    async def serve_metrics(request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(metrics.registry))
        resp.headers["Content-Type"] = "text/plain; version=0.0.4; charset=utf-8"
        return resp

    app = web.Application()
    app.router.add_get("/metrics", serve_metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, *listen).start()
    return runner


async def run(args: argparse.Namespace, *, out: IO[str] | None = None,
              err: IO[str] | None = None, stop: asyncio.Event | None = None) -> int:
    """Run the monitor as the command line asked; returns the exit status.

    Importable so that tests and other programs can run it inside their own event loop;
    ``stop`` ends a daemon (the command line sets it on SIGTERM and SIGINT).
    """
    # deferred: the monitor, aiohttp and Prometheus, not for `--help`
    import asyncio

    from ledger.client.http import FetchError, HttpClient
    from ledger.monitor.core import Alarm, MonitorMetrics
    from ledger.monitor.polls import LogPolls, one_log
    from ledger.monitor.state import MonitorStateError

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    config = _config(args)
    listen = parse_host_port(args.metrics, what="--metrics") if args.metrics else None
    daemon = args.interval is not None and not args.once
    metrics = MonitorMetrics()
    stop = stop or asyncio.Event()
    driver: Driver = getattr(args, "driver", None) or one_log

    def state_for(origin: str, key: str) -> Path | None:
        if args.no_state:
            return None
        path = default_state_path(origin, key)
        # With --state FILE, the other logs of a notary keep theirs beside it.
        return Path(args.state).expanduser().parent / path.name if args.state else path

    async with HttpClient(timeout=config.timeout, follow_redirects=True) as http:
        polls = LogPolls(config, http, metrics, out=out, state_for=state_for)
        runner = None if listen is None else await _serve_metrics(listen, metrics)
        try:
            while True:
                code = ExitCode.OK
                try:
                    reports = await driver(polls)
                except MonitorStateError as e:
                    print(f"notary: error: {e}", file=err)
                    return ExitCode.USAGE
                except Alarm as alarm:
                    path = polls.record(alarm)
                    print(f"notary monitor: ALARM {alarm.kind}: {alarm.message} "
                          f"(evidence: {path})", file=err, flush=True)
                    code = ExitCode.CHECK_FAILED
                except FetchError as e:
                    metrics.fetch_errors.inc()
                    print(f"notary monitor: cannot read the log: {e}", file=err, flush=True)
                    code = ExitCode.UNREACHABLE
                else:
                    metrics.alarm_active.set(0)
                    for origin, report in reports:
                        # One line per log and poll, quiet ones included: a silent daemon
                        # cannot be told from a hung one.
                        print(_ok_line(origin, report, config.audit), file=err if daemon else out,
                              flush=True)
                if not daemon:
                    if config.state_path is None and code == ExitCode.OK:
                        print("notary monitor: --no-state: the next run cannot check "
                              "consistency with this one", file=err)
                    return code
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), args.interval)
                if stop.is_set():
                    return ExitCode.OK
        finally:
            await polls.close()
            if runner is not None:
                await runner.cleanup()


def _ok_line(origin: str, report: PollReport, audit: bool) -> str:
    since = ("first seen" if report.previous is None
             else f"consistent with {report.previous}")
    if report.previous == report.size:
        since = "unchanged"
    audited = (f"; audited {report.audited} entries in {report.audit_seconds:.1f}s" if audit
               else "")
    return f"ok: {origin} size {report.size} ({since}){audited}"


def cmd_monitor(args: argparse.Namespace) -> int:
    # deferred: the event loop and the logging stack, not for `--help`
    import asyncio

    from ledger.process import event_loop
    from ledger.process.structured_logs import configure

    configure("auto", "info")

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        return await run(args, stop=stop)

    try:
        return event_loop.run(main())
    except UsageError as e:
        print(f"notary: error: {e}", file=sys.stderr)
        return ExitCode.USAGE


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
             watch: Callable[[Sequence[str]], EntryFilter] | None = None,
             driver: Driver | None = None, log_help: str | None = None) -> None:
    """Add ``monitor`` to a command; with ``watch``, also ``--watch-server`` (entries of these
    MCP servers are reported, through the filter ``watch`` makes for them); with ``driver``,
    the logs polled are the driver's (the notary's follows its chain of logs from ``--log``)
    rather than the one log at ``--log``."""
    p = subparsers.add_parser(
        "monitor", help="verify a log's checkpoints stay consistent; audit its tiles",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log", required=True, metavar="URL",
                   help=log_help or "the log's base URL (where /checkpoint and /tile/ are "
                                    "served)")
    p.add_argument("--vkey", required=True, metavar="VKEY",
                   help="the log's verifier key, or a file holding it")
    p.add_argument("--witness", action="append", metavar="VKEY",
                   help="a witness's cosignature verifier key (repeatable)")
    p.add_argument("--quorum", type=int, metavar="K",
                   help="cosignatures required (default: every --witness)")
    p.add_argument("--policy", "--witness-policy", dest="policy", metavar="FILE",
                   help="a C2SP tlog-policy file (witnesses, groups, quorum) instead of "
                        "--witness and --quorum (--witness-policy, as in notary verify)")
    state = p.add_mutually_exclusive_group()
    state.add_argument("--state", metavar="FILE",
                       help="where the last verified checkpoint and audit position are kept "
                            "(default: a file per log under $XDG_STATE_HOME/mcp-notary/monitor/, "
                            "else ~/.local/state/mcp-notary/monitor/)")
    state.add_argument("--no-state", action="store_true",
                       help="keep no state: every run starts from scratch (first seen)")
    if watch is not None:
        p.add_argument("--watch-server", action="append", metavar="NAME",
                       help="report new entries of this MCP server (repeatable; implies --audit)")
    p.add_argument("--audit", action="store_true",
                   help="download new entries and tiles, recompute every tile and the root")
    p.add_argument("--interval", type=float, metavar="S",
                   help="run as a daemon, polling every S seconds")
    p.add_argument("--once", action="store_true", help="poll once and exit (the default)")
    p.add_argument("--evidence-dir", default="monitor-evidence", metavar="DIR",
                   help="where alarm evidence is written (default ./monitor-evidence)")
    p.add_argument("--metrics", metavar="HOST:PORT",
                   help="serve Prometheus metrics at http://HOST:PORT/metrics")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S",
                   help="per-request timeout (default 30)")
    p.set_defaults(func=cmd_monitor, watch_filter=watch, driver=driver)
