"""The notary's key material on disk: the log key and the receipt keys, all files 0600.

Layout of the data directory::

    notary.store.sqlite    the store (SQLite): log tiles, checkpoints, receipts, accounts
    log.key  log.vkey      the log's note key (PRIVATE+KEY+… form) and its verifier key
                           (after a compromised roll, log.key is the new root; log.vkey stays
                           log 0's key; log.key.retired-<g> is a retired root, unused)
    receipt-keys/<kid>.key receipt signing seeds (base64url); the public halves are
                           registered in the store, so the JWKS keeps old keys after a rotation

The seed file is written first and the public half registered second: registering is the switch
to a new key. A key file the store does not know yet (a rotation interrupted between the two, a
first start, a memory store) is registered when the notary starts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ledger.core.note import Ed25519Signer
from ledger.process.keyfile import KeyFileError, read_secret, write_secret
from notary.core.ids import b64url_decode, b64url_encode
from notary.core.jwks import Jwks
from notary.core.receipts import ReceiptKey
from notary.store.base import NotaryStore, ReceiptKeyRecord

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
    def log_key_next(self) -> Path:
        """A compromised roll's new root, until the roll committed (notary.serving.root_key)."""
        return self.root / "log.key.next"

    def retired_log_key(self, generation: int) -> Path:
        return self.root / f"log.key.retired-{generation}"

    @property
    def receipt_keys(self) -> Path:
        return self.root / "receipt-keys"

    def receipt_key(self, kid: str) -> Path:
        return self.receipt_keys / f"{kid}.key"


def create_log_key(paths: Paths, origin: str) -> Ed25519Signer:
    signer = Ed25519Signer.generate(origin)
    write_secret(paths.log_key, signer.private_key_text())
    paths.log_vkey.write_text(signer.verifier_key_text() + "\n")
    return signer


def load_log_key(paths: Paths) -> Ed25519Signer:
    return Ed25519Signer.from_private_key(read_secret(paths.log_key))


def write_receipt_key(paths: Paths) -> ReceiptKey:
    """A new receipt key's seed file (0600); not in use until registered in the store."""
    key = ReceiptKey.generate()
    paths.receipt_keys.mkdir(mode=0o700, exist_ok=True)
    write_secret(paths.receipt_key(key.kid), b64url_encode(key.seed))
    return key


def _jwk_text(key: ReceiptKey) -> str:
    return json.dumps(key.public_jwk(), sort_keys=True)


async def create_receipt_key(paths: Paths, store: NotaryStore) -> ReceiptKey:
    """A new receipt key: seed file first, then its public half in the store (the switch)."""
    key = write_receipt_key(paths)
    await store.add_receipt_key(key.kid, _jwk_text(key), time.time())
    return key


async def register_key_files(paths: Paths, store: NotaryStore) -> list[str]:
    """Register every receipt key file the store does not know (oldest file first, so the
    newest becomes the signing key); the kids registered."""
    if not paths.receipt_keys.is_dir():
        return []
    known = {r.kid for r in await store.receipt_keys()}
    files = sorted(paths.receipt_keys.glob("*.key"), key=lambda f: (f.stat().st_mtime, f.name))
    added = []
    for file in files:
        if file.stem in known:
            continue
        key = load_receipt_key(paths, file.stem)
        if await store.add_receipt_key(key.kid, _jwk_text(key), file.stat().st_mtime):
            added.append(key.kid)
    return added


def load_receipt_key(paths: Paths, kid: str) -> ReceiptKey:
    seed = b64url_decode(read_secret(paths.receipt_key(kid)))
    key = ReceiptKey.from_seed(seed)
    if key.kid != kid:
        raise KeyFileError(f"receipt key file {kid}.key holds the key {key.kid}")
    return key


def current_receipt_key(paths: Paths, records: Sequence[ReceiptKeyRecord]) -> ReceiptKey:
    """The key that signs: the newest registered one whose seed this data directory holds."""
    for record in reversed(records):
        if paths.receipt_key(record.kid).exists():
            return load_receipt_key(paths, record.kid)
    raise KeyFileError(f"none of the store's receipt keys has its seed file in "
                       f"{paths.receipt_keys}")


def jwks_from_records(records: Sequence[ReceiptKeyRecord]) -> Jwks:
    return Jwks({"keys": [json.loads(r.jwk) for r in records]})
