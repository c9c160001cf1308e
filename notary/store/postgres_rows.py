"""A batch's receipt rows as the columns of the PostgreSQL write statement
(:data:`notary.store.postgres_schema.ADD_CTES`), built in one pass over the batch.

Per receipt this is the work of the event loop's thread in every commit, so it is kept to
plain operations: the ids' lookup keys come from one base64 decode of the whole batch (the
ids are the notary's own, already shape-checked when made), the digests' keys from the
batch's screen when it computed them, the entry URL's prefix checked once per receipt.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Mapping, Sequence

from ledger.storage.base import StoreError
from notary.core.logs import INDEX_BITS
from notary.core.receipts import Receipt
from notary.store.sqlite_schema import Refs, digest_key

__all__ = ["id_keys", "receipt_columns"]

_ID_PREFIX = 3  # "tc_"
_ID_KEY_CHARS = 8  # base64url of the id's first 6 bytes, of which the key is the first 4


def id_keys(ids: Sequence[str]) -> list[int]:
    """:func:`notary.store.sqlite_schema.id_key` of each id (4 signed big-endian bytes of its
    random part), for ids the notary made: one decode for the batch. An id whose key
    characters are not base64url is a :class:`StoreError`."""
    try:
        raw = base64.urlsafe_b64decode("".join(i[_ID_PREFIX:_ID_PREFIX + _ID_KEY_CHARS]
                                               for i in ids))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 6 * len(ids) or any(len(i) < _ID_PREFIX + _ID_KEY_CHARS for i in ids):
        raise StoreError("a receipt id of the batch is not one the notary makes")
    return [k for (k,) in struct.iter_unpack(">i2x", raw)]


def receipt_columns(receipts: Sequence[tuple[Receipt, str]], refs: Refs, log_number: int,
                    salt: bytes, digest_keys: Mapping[str, int]) -> list[list[object]]:
    """The nine columns of the receipts' rows (position, signature, key, ledger, account,
    server, tool, id key, digest key); ``digest_keys`` holds keys already computed with
    ``salt`` (the screen's). A name missing from ``refs`` is a KeyError."""
    base = log_number << INDEX_BITS
    kids, ledgers, names, accounts = refs.kids, refs.ledgers, refs.names, refs.accounts
    pos: list[object] = []
    sig: list[object] = []
    kid: list[object] = []
    ledger: list[object] = []
    account: list[object] = []
    server: list[object] = []
    tool: list[object] = []
    digest: list[object] = []
    for r, who in receipts:
        s = r.signature
        assert s is not None
        index = r.index
        if not 0 <= index < 1 << INDEX_BITS:
            raise ValueError(f"no position for log {log_number} index {index}")
        pos.append(base | index)
        sig.append(s.raw)
        kid.append(kids[s.kid])
        suffix = str(index)
        url = r.entry_url
        if not url.endswith(suffix):
            raise StoreError(f"receipt {r.id}: entry_url does not end with its index {suffix}")
        ledger.append(ledgers[(r.origin, url[:-len(suffix)])])
        account.append(accounts[who])
        server.append(names[r.server])
        tool.append(names[r.tool])
        d = r.call_sha256
        digest.append(digest_keys[d] if d in digest_keys else digest_key(d, salt))
    ids: list[object] = list(id_keys([r.id for r, _ in receipts]))
    return [pos, sig, kid, ledger, account, server, tool, ids, digest]
