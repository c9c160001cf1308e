"""What ``witness`` and ``mirror`` share: their keys, ``keygen``, the flags of ``serve``
(``--key``, ``--log``, ``--listen``, ``--data``, the log format), serving until a signal, and
how a failure is reported.

A cosigner key is an Ed25519 cosignature/v1 key (type 0x04) or an ML-DSA-44 subtree/v1 key
(type 0x06); a log is given as ``--log ORIGIN=VKEY`` (or just ``--log VKEY``: the origin is then
the key's name), once per key the log signs with.
"""

# The key code, the HTTP server and the logging stack are imported by the functions that run a
# command (each `# deferred:`), not for `--help`.

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.process.exitcodes import ExitCode, UsageError

if TYPE_CHECKING:
    from aiohttp import web

    from ledger.core.cosignature import CosignatureSigner
    from ledger.core.note import NoteVerifier
    from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
    from ledger.cosigner.cosigner import WitnessSigner

__all__ = ["ALGORITHMS", "add_command", "add_keygen", "add_serve_arguments", "keys_and_logs",
           "new_signer", "parse_log_spec", "read_witness_key", "reporting", "serve"]

Command = Callable[[argparse.Namespace], int]

ALGORITHMS = ("ed25519", "ml-dsa-44")
"""``--algorithm`` values of ``keygen`` (:func:`new_signer` makes a key of each)."""


def new_signer(algorithm: str, name: str) -> CosignatureSigner | SubtreeCosignatureSigner:
    """A new witness (or mirror) key of one of :data:`ALGORITHMS`, named ``name``."""
    # deferred: the key code (PyNaCl, ML-DSA), not for `--help`
    from ledger.core.cosignature import CosignatureSigner
    from ledger.core.subtree_cosignature import SubtreeCosignatureSigner

    if algorithm == "ml-dsa-44":
        return SubtreeCosignatureSigner.generate(name)
    return CosignatureSigner.generate(name)


def parse_log_spec(text: str) -> tuple[str, NoteVerifier]:
    """``ORIGIN=VKEY`` or ``VKEY`` → (origin, log verifier, Ed25519 or ML-DSA-44).

    A vkey's base64 may end in ``=``, so a whole-string vkey is tried first, then the text is
    split at the first ``=`` (origins, being key names, hold none). The vkey may also be given
    as the path of a file holding it (``notary-data/log.vkey``).
    """
    # deferred: the key code (PyNaCl, ML-DSA), not for `--help`
    from ledger.core.cosignature import parse_log_key
    from ledger.core.note import NoteError

    if "+" not in text and Path(text).is_file():
        text = Path(text).read_text().strip()
    try:
        verifier = parse_log_key(text)
    except NoteError:
        pass
    else:
        return verifier.name, verifier
    origin, sep, vkey = text.partition("=")
    if not sep or not origin:
        raise UsageError(f"--log {text!r}: want ORIGIN=VKEY or a log verifier key")
    try:
        return origin, parse_log_key(vkey)
    except NoteError as e:
        raise UsageError(f"--log {text!r}: bad log verifier key: {e}") from None


def read_witness_key(path: Path) -> WitnessSigner:
    """A witness (or mirror) private key file of either kind, the type byte deciding."""
    # deferred: the key code (PyNaCl, ML-DSA), not for `--help`
    from ledger.core.cosignature import CosignatureSigner
    from ledger.core.note import KEY_TYPE_SUBTREE_V1, NoteError, parse_private_key_text
    from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
    from ledger.process.keyfile import read_secret

    text = read_secret(path)
    try:
        _, _, key_type, _ = parse_private_key_text(text)
        if key_type == KEY_TYPE_SUBTREE_V1:
            return SubtreeCosignatureSigner.from_private_key(text)
        return CosignatureSigner.from_private_key(text)
    except NoteError as e:
        raise UsageError(f"{path}: not a witness private key: {e}") from None


def keys_and_logs(args: argparse.Namespace
                  ) -> tuple[list[WitnessSigner], dict[str, list[NoteVerifier]]]:
    """The keys of ``--key`` (each once) and the logs of ``--log``, their keys by origin."""
    signers = [read_witness_key(Path(k)) for k in args.key]
    if len({(s.name, s.key_id) for s in signers}) != len(signers):
        raise UsageError("--key: the same key is given twice")
    logs: dict[str, list[NoteVerifier]] = {}
    for spec in args.log:
        origin, verifier = parse_log_spec(spec)
        logs.setdefault(origin, []).append(verifier)
    return signers, logs


def _cmd_keygen(args: argparse.Namespace) -> int:
    # deferred: the key code, not for `--help`
    from ledger.core.note import NoteError
    from ledger.process.keyfile import write_secret

    try:
        signer = new_signer(args.algorithm, args.name)
    except NoteError as e:
        raise UsageError(f"--name {args.name!r}: {e}") from None
    write_secret(Path(args.out), signer.private_key_text())
    print(signer.verifier_key_text())
    return 0


async def serve(app: web.Application, role: str, signers: Sequence[WitnessSigner],
                logs: Mapping[str, object], host: str, port: int) -> None:
    """Serve ``app`` until a signal, saying where (a ``<role>_started`` log line, and the URL
    alone on stdout)."""
    # deferred: the HTTP server and structlog, not for `--help`
    import structlog

    from ledger.http.run import serve_until_signalled

    def announce(url: str) -> None:
        structlog.get_logger(f"ledger.{role}").info(
            f"{role}_started", vkeys=[s.verifier_key_text() for s in signers],
            logs=sorted(logs), url=url)
        print(url, flush=True)

    # a failure to listen is a ListenError, a usage error with its message
    await serve_until_signalled(app, host, port, announce)


def reporting(program: str, expected: Callable[[], tuple[type[Exception], ...]], db_name: str
              ) -> Callable[[Command], Command]:
    """Wrap a cosigner's command (witness, mirror): an ``expected()`` failure is one
    ``<program>: error:`` line and exit status 2, a damaged database under ``--data`` says which
    file and what to do, and Ctrl-C exits as interrupted. ``expected`` is called only when a
    command fails, so that the modules of those errors are not imported for ``--help``."""

    def wrap(func: Command) -> Command:
        def wrapped(args: argparse.Namespace) -> int:
            try:
                return func(args)
            except Exception as e:
                if isinstance(e, expected()):
                    print(f"{program}: error: {e}", file=sys.stderr)
                    return ExitCode.USAGE
                # deferred: what only a damaged database's message needs (sqlite3)
                from ledger.storage.damage import corruption_in, damage_message

                if corruption_in(e) is None:
                    raise
                data = getattr(args, "data", None)
                db = Path(data) / db_name if data is not None else None
                print(f"{program}: error: {damage_message(db, e, None)}", file=sys.stderr)
                return ExitCode.USAGE
            except KeyboardInterrupt:
                return ExitCode.INTERRUPTED

        return wrapped

    return wrap


def add_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], role: str,
                help: str, description: str | None
                ) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The ``<role>`` command, whose actions (``keygen``, ``serve``) the caller adds."""
    command = subparsers.add_parser(role, help=help, description=description,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
    return command.add_subparsers(dest="action", required=True)


def add_keygen(sub: argparse._SubParsersAction[argparse.ArgumentParser], role: str,
               example: str, default: str, algorithm_help: str,
               run: Callable[[Command], Command]) -> None:
    """``<role> keygen``: a new key of ``--algorithm`` (``default`` unless given)."""
    p = sub.add_parser("keygen", help=f"create a {role} key (0600 file); prints its vkey")
    p.add_argument("--name", required=True,
                   help=f"the {role}'s key name, e.g. {example}")
    p.add_argument("--out", required=True, metavar="FILE", help="private key file to create")
    p.add_argument("--algorithm", choices=sorted(ALGORITHMS), default=default,
                   help=algorithm_help)
    p.set_defaults(func=run(_cmd_keygen))


def add_serve_arguments(p: argparse.ArgumentParser, role: str, log_help: str,
                        default_listen: str) -> None:
    """The flags every cosigner's ``serve`` has."""
    p.add_argument("--key", required=True, action="append", metavar="FILE",
                   help=f"{role} private key file (repeatable: it cosigns with each key)")
    p.add_argument("--log", required=True, action="append", metavar="ORIGIN=VKEY",
                   help=log_help)
    p.add_argument("--listen", default=default_listen, metavar="HOST:PORT",
                   help=f"address to listen on (default {default_listen})")
    p.add_argument("--data", default=f"{role}-data", metavar="DIR",
                   help=f"state directory (default ./{role}-data)")
    p.add_argument("--log-format", choices=["auto", "json", "console"], default="auto")
    p.add_argument("--log-level", default="info")
