"""The notary's key material on disk: the log key and the receipt keys, all files 0600.

Layout of the data directory::

    notary.store.sqlite              log tiles, checkpoints, receipts, accounts
    log.key  log.vkey      the log's note key (PRIVATE+KEY+… form) and its verifier key
    receipt-keys/<kid>.key receipt signing seeds (base64url); the public halves sit in the
                           database, so the JWKS keeps old keys after a rotation
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ledger.core.note import Ed25519Signer
from ledger.keyfile import KeyFileError, read_secret, write_secret
from notary.core.ids import b64url_decode, b64url_encode
from notary.core.receipts import Jwks, ReceiptKey
from notary.store.sqlite import add_receipt_key

DB_NAME = "notary.store.sqlite"


@dataclass(frozen=True)
class Paths:
    root: Path

    @property
    def db(self) -> Path:
        return self.root / DB_NAME

    @property
    def log_key(self) -> Path:
        return self.root / "log.key"

    @property
    def log_vkey(self) -> Path:
        return self.root / "log.vkey"

    @property
    def receipt_keys(self) -> Path:
        return self.root / "receipt-keys"


def create_log_key(paths: Paths, origin: str) -> Ed25519Signer:
    signer = Ed25519Signer.generate(origin)
    write_secret(paths.log_key, signer.private_key_text())
    paths.log_vkey.write_text(signer.verifier_key_text() + "\n")
    return signer


def load_log_key(paths: Paths) -> Ed25519Signer:
    return Ed25519Signer.from_private_key(read_secret(paths.log_key))


def create_receipt_key(paths: Paths, conn: sqlite3.Connection) -> ReceiptKey:
    """A new receipt key: seed file first, then its public half in the database (the switch)."""
    key = ReceiptKey.generate()
    paths.receipt_keys.mkdir(mode=0o700, exist_ok=True)
    write_secret(paths.receipt_keys / f"{key.kid}.key", b64url_encode(key.seed))
    add_receipt_key(conn, key.kid, json.dumps(key.public_jwk(), sort_keys=True))
    return key


def load_receipt_key(paths: Paths, kid: str) -> ReceiptKey:
    seed = b64url_decode(read_secret(paths.receipt_keys / f"{kid}.key"))
    key = ReceiptKey.from_seed(seed)
    if key.kid != kid:
        raise KeyFileError(f"receipt key file {kid}.key holds the key {key.kid}")
    return key


def jwks_from_rows(rows: list[tuple[str, str]]) -> Jwks:
    return Jwks({"keys": [json.loads(jwk) for _, jwk in rows]})
