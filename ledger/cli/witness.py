"""``notary witness keygen`` and ``notary witness serve``.

A witness key is an Ed25519 cosignature/v1 key (type 0x04) or an ML-DSA-44 subtree/v1 key (type
0x06, ``--algorithm ml-dsa-44``): ``keygen`` writes its private form
(``PRIVATE+KEY+<name>+<id>+…``) to a new 0600 file and prints, as its last line, the verifier
key that logs and verifiers configure. ``serve`` runs the tlog-witness HTTP service with every
``--key`` given (it cosigns with each) for the logs given with ``--log ORIGIN=VKEY`` (or just
``--log VKEY``: the origin is then the key's name, as it is for every checkpoint of this
project), where the log key is Ed25519 or ML-DSA-44, keeping its state in
``--data DIR/witness.db``.
"""

# The key code, the HTTP server and the logging stack are imported by the functions that run a
# command (each `# deferred:`), not for `--help`: the docstring above is the help's description.

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.process.exitcodes import ExitCode, UsageError
from ledger.process.netaddr import parse_host_port

if TYPE_CHECKING:
    from ledger.core.cosignature import CosignatureSigner
    from ledger.core.note import NoteVerifier
    from ledger.core.subtree_cosignature import SubtreeCosignatureSigner
    from ledger.cosigner.cosigner import WitnessSigner

__all__ = ["ALGORITHMS", "new_signer", "parse_log_spec", "read_witness_key", "register",
           "reporting"]

DB_NAME = "witness.db"
DEFAULT_LISTEN = "127.0.0.1:7380"

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
    """A witness private key file of either kind, the type byte in the key text deciding."""
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


def cmd_keygen(args: argparse.Namespace) -> int:
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


async def _serve(signers: list[WitnessSigner], logs: dict[str, list[NoteVerifier]],
                 data: Path, host: str, port: int) -> None:
    # deferred: the HTTP server, the witness's store and structlog, not for `--help`
    import structlog

    from ledger.http.run import serve_until_signalled
    from ledger.witness.server import Witness, create_witness_app
    from ledger.witness.store import WitnessStore

    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    vkeys = [s.verifier_key_text() for s in signers]
    store = await WitnessStore.open(data / DB_NAME, vkeys)
    app = create_witness_app(Witness(signers, logs, store))

    def announce(url: str) -> None:
        structlog.get_logger("ledger.witness").info(
            "witness_started", vkeys=vkeys, logs=sorted(logs), url=url)
        print(url, flush=True)

    try:  # a failure to listen is a ListenError, a usage error with its message
        await serve_until_signalled(app, host, port, announce)
    finally:
        await store.close()


def cmd_serve(args: argparse.Namespace) -> int:
    # deferred: the logging stack and the event loop, not for `--help`
    from ledger.process import event_loop
    from ledger.process.structured_logs import configure

    configure(args.log_format, args.log_level)
    signers = [read_witness_key(Path(k)) for k in args.key]
    if len({(s.name, s.key_id) for s in signers}) != len(signers):
        raise UsageError("--key: the same key is given twice")
    logs: dict[str, list[NoteVerifier]] = {}
    for spec in args.log:
        origin, verifier = parse_log_spec(spec)
        logs.setdefault(origin, []).append(verifier)
    host, port = parse_host_port(args.listen, what="--listen")
    event_loop.run(_serve(signers, logs, Path(args.data), host, port))
    return 0


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


def _expected() -> tuple[type[Exception], ...]:
    # deferred: imported only when a command fails
    from ledger.process.keyfile import KeyFileError
    from ledger.witness.store import WitnessStoreError

    return UsageError, WitnessStoreError, KeyFileError


_run = reporting("notary", _expected, DB_NAME)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``witness keygen`` and ``witness serve`` to the ``notary`` command."""
    witness = subparsers.add_parser(
        "witness", help="run a C2SP tlog-witness that cosigns checkpoints of logs",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = witness.add_subparsers(dest="action", required=True)

    p = sub.add_parser("keygen", help="create a witness key (0600 file); prints its vkey")
    p.add_argument("--name", required=True,
                   help="the witness's key name, e.g. witness.example.com/w1")
    p.add_argument("--out", required=True, metavar="FILE", help="private key file to create")
    p.add_argument("--algorithm", choices=sorted(ALGORITHMS), default="ed25519",
                   help="ed25519 (cosignature/v1, the default) or ml-dsa-44 (subtree/v1, "
                        "post-quantum, and needed to serve sign-subtree)")
    p.set_defaults(func=_run(cmd_keygen))

    p = sub.add_parser("serve", help="serve POST /add-checkpoint, POST /sign-subtree and "
                                     "GET /<origin hash>/checkpoint")
    p.add_argument("--key", required=True, action="append", metavar="FILE",
                   help="witness private key file (repeatable: it cosigns with each key)")
    p.add_argument("--log", required=True, action="append", metavar="ORIGIN=VKEY",
                   help="a log to witness (repeatable; several keys per origin allowed)")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to listen on (default {DEFAULT_LISTEN})")
    p.add_argument("--data", default="witness-data", metavar="DIR",
                   help="state directory (default ./witness-data)")
    p.add_argument("--log-format", choices=["auto", "json", "console"], default="auto")
    p.add_argument("--log-level", default="info")
    p.set_defaults(func=_run(cmd_serve))
