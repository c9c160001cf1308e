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

# The witness's server and store and the logging stack are imported by the functions that run
# a command (each `# deferred:`), not for `--help`: the docstring above is the help's
# description.

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.cli import cosigner_args as shared
from ledger.process.exitcodes import UsageError
from ledger.process.netaddr import parse_host_port

if TYPE_CHECKING:
    from ledger.core.note import NoteVerifier
    from ledger.cosigner.cosigner import WitnessSigner

__all__ = ["register"]

DB_NAME = "witness.db"
DEFAULT_LISTEN = "127.0.0.1:7380"


async def _serve(signers: list[WitnessSigner], logs: dict[str, list[NoteVerifier]],
                 data: Path, host: str, port: int) -> None:
    # deferred: the witness's server and store, not for `--help`
    from ledger.witness.server import Witness, create_witness_app
    from ledger.witness.store import WitnessStore

    data.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = await WitnessStore.open(data / DB_NAME, [s.verifier_key_text() for s in signers])
    try:
        await shared.serve(create_witness_app(Witness(signers, logs, store)), "witness",
                           signers, logs, host, port)
    finally:
        await store.close()


def cmd_serve(args: argparse.Namespace) -> int:
    # deferred: the logging stack and the event loop, not for `--help`
    from ledger.process import event_loop
    from ledger.process.structured_logs import configure

    configure(args.log_format, args.log_level)
    signers, logs = shared.keys_and_logs(args)
    host, port = parse_host_port(args.listen, what="--listen")
    event_loop.run(_serve(signers, logs, Path(args.data), host, port))
    return 0


def _expected() -> tuple[type[Exception], ...]:
    # deferred: imported only when a command fails
    from ledger.process.keyfile import KeyFileError
    from ledger.witness.store import WitnessStoreError

    return UsageError, WitnessStoreError, KeyFileError


_run = shared.reporting("notary", _expected, DB_NAME)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``witness keygen`` and ``witness serve`` to the ``notary`` command."""
    sub = shared.add_command(subparsers, "witness", "run a C2SP tlog-witness that cosigns "
                             "checkpoints of logs", __doc__)
    shared.add_keygen(sub, "witness", "witness.example.com/w1", "ed25519",
                      "ed25519 (cosignature/v1, the default) or ml-dsa-44 (subtree/v1, "
                      "post-quantum, and needed to serve sign-subtree)", _run)
    p = sub.add_parser("serve", help="serve POST /add-checkpoint, POST /sign-subtree and "
                                     "GET /<origin hash>/checkpoint")
    shared.add_serve_arguments(p, "witness", "a log to witness (repeatable; several keys per "
                                             "origin allowed)", DEFAULT_LISTEN)
    p.set_defaults(func=_run(cmd_serve))
