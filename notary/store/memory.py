"""The notary's store in memory: the contract of ``notary.store.base`` for tests and throwaway
notaries (``notary serve --database memory:``). Nothing survives the process.

It keeps the same transaction semantics as the database backends: the batch's screen reads and
receipt rows happen under the transaction's lock, and its rows become visible together with
the tiles and checkpoint when it ends cleanly, never before and never after a failure.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from ledger.storage.base import StoreError
from ledger.storage.memory import MemoryStore, MemoryWriteTx
from notary.core.logs import position
from notary.core.receipts import Receipt
from notary.core.search import in_window
from notary.core.server_names import NameHold, name_skeleton
from notary.store.base import (
    AllowanceConflict,
    ApiKeyListing,
    ApiKeyRecord,
    IssuedReceipt,
    ReceiptKeyRecord,
    Screening,
    ServerNameRecord,
    ServerNameTaken,
    UsageKey,
    new_claims,
)

__all__ = ["MemoryNotaryStore"]


@dataclass
class _Account:
    monthly_allowance: int | None
    created: float


@dataclass
class _ApiKey:
    account: str
    secret_sha256: bytes
    created: float
    revoked: float | None = None


class MemoryNotaryWriteTx(MemoryWriteTx):
    def __init__(self, store: MemoryNotaryStore) -> None:
        super().__init__(store)
        self._notary = store
        self.receipts: list[IssuedReceipt] = []
        self.usage: dict[UsageKey, int] = {}

    async def screen(self, digests: Collection[str], usage: Collection[UsageKey],
                     servers: Collection[str] = ()) -> Screening:
        store = self._notary
        logged: dict[str, Receipt | None] = {
            d: store._receipts[store._by_digest[d]] for d in digests if d in store._by_digest}
        logged_by = {d: store._accounts_of[store._by_digest[d]] for d in logged}
        return Screening(logged, {k: store._usage.get(k, 0) for k in usage},
                         store._last_issued_at, logged_by=logged_by,
                         servers={n: store._hold(n) for n in servers})

    async def add_receipts(self, receipts: Sequence[IssuedReceipt],
                           usage: Mapping[UsageKey, int]) -> None:
        unknown = ({r.account for r in receipts} | {a for a, _ in usage}) - \
            self._notary._accounts.keys()
        if unknown:
            raise StoreError(f"account {sorted(unknown)[0]!r} does not exist")
        self.receipts.extend(receipts)
        for key, n in usage.items():
            self.usage[key] = self.usage.get(key, 0) + n


class MemoryNotaryStore(MemoryStore):
    """Log tiles, checkpoints and the notary's rows in dictionaries."""

    def __init__(self) -> None:
        super().__init__()
        self._receipts: dict[int, Receipt] = {}
        self._accounts_of: dict[int, str] = {}  # receipt index -> account
        self._names: dict[str, ServerNameRecord] = {}
        self._by_id: dict[str, int] = {}
        self._by_digest: dict[str, int] = {}
        self._accounts: dict[str, _Account] = {}
        self._keys: dict[str, _ApiKey] = {}
        self._usage: dict[UsageKey, int] = {}
        self._receipt_keys: dict[str, ReceiptKeyRecord] = {}
        self._last_issued_at: str | None = None

    # Transactions ---------------------------------------------------------------------------

    def _apply(self, tx: MemoryWriteTx) -> None:
        assert isinstance(tx, MemoryNotaryWriteTx)
        at = position(tx.log_number, 0)  # receipts are kept by position (notary.core.logs)
        for issued in tx.receipts:  # checked before anything is applied: all or nothing
            r = issued.receipt
            if r.call_sha256 in self._by_digest or r.id in self._by_id \
                    or at + r.index in self._receipts:
                raise RuntimeError(f"receipt {r.id} collides with a stored one")  # a bug upstream
        pairs = [(i.receipt, i.account) for i in tx.receipts]
        claims = new_claims(pairs, {r.receipt.server: self._names[r.receipt.server].account
                                    for r in tx.receipts if r.receipt.server in self._names})
        super()._apply(tx)
        for issued in tx.receipts:
            r = issued.receipt
            self._receipts[at + r.index] = r
            self._by_id[r.id] = at + r.index
            self._by_digest[r.call_sha256] = at + r.index
            self._accounts_of[at + r.index] = issued.account
        for name, account in claims:
            self._names[name] = ServerNameRecord(name, account, time.time())
        for key, n in tx.usage.items():
            self._usage[key] = self._usage.get(key, 0) + n
        for issued in tx.receipts:
            if self._last_issued_at is None or issued.receipt.issued_at > self._last_issued_at:
                self._last_issued_at = issued.receipt.issued_at

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[MemoryNotaryWriteTx]:
        async with self._lock:
            tx = MemoryNotaryWriteTx(self)
            yield tx
            self._apply(tx)

    def transaction(self) -> AbstractAsyncContextManager[MemoryNotaryWriteTx]:
        return self._transaction()

    # Receipts -------------------------------------------------------------------------------

    async def receipt_by_id(self, receipt_id: str) -> Receipt | None:
        index = self._by_id.get(receipt_id)
        return None if index is None else self._receipts[index]

    async def receipt_by_digest(self, call_sha256: str) -> Receipt | None:
        index = self._by_digest.get(call_sha256)
        return None if index is None else self._receipts[index]

    async def search_receipts(self, *, server: str | None = None, tool: str | None = None,
                              since: str | None = None, until: str | None = None,
                              before: tuple[str, int] | None = None, limit: int = 20
                              ) -> list[Receipt]:
        found = sorted(((pos, r) for pos, r in self._receipts.items()
                        if (server is None or r.server == server)
                        and (tool is None or r.tool == tool)
                        and in_window(r.issued_at, pos, since=since, until=until,
                                      before=before)),
                       key=lambda pr: (pr[1].issued_at, pr[0]), reverse=True)
        return [r for _, r in found[:max(limit, 0)]]

    # Accounts, API keys and usage -----------------------------------------------------------

    async def first_receipt(self, lo: int, hi: int) -> int | None:
        return min((p for p in self._receipts if lo <= p < hi), default=None)

    async def reclaim_receipts(self, lo: int, hi: int,
                               keys: Sequence[tuple[int, str, str]]) -> int:
        gone = [p for p in self._receipts if lo <= p < hi]
        for p in gone:
            receipt = self._receipts.pop(p)
            self._accounts_of.pop(p, None)
            if self._by_id.get(receipt.id) == p:
                del self._by_id[receipt.id]
            if self._by_digest.get(receipt.call_sha256) == p:
                del self._by_digest[receipt.call_sha256]
        return len(gone)

    async def free_bytes(self) -> int | None:
        return None

    async def api_key(self, key_id: str) -> ApiKeyRecord | None:
        key = self._keys.get(key_id)
        if key is None:
            return None
        account = self._accounts[key.account]
        return ApiKeyRecord(key_id, key.account, key.secret_sha256, key.revoked,
                            account.monthly_allowance)

    async def usage(self, account: str, month: str) -> int:
        return self._usage.get((account, month), 0)

    async def create_api_key(self, account: str, monthly_allowance: int | None, key_id: str,
                             secret_sha256: bytes) -> None:
        if key_id in self._keys:
            raise ValueError(f"API key {key_id} exists already")
        now = time.time()
        known = self._accounts.get(account)
        if known is None:
            self._accounts[account] = _Account(monthly_allowance, now)
        elif monthly_allowance is not None and monthly_allowance != known.monthly_allowance:
            raise AllowanceConflict(account, known.monthly_allowance)
        self._keys[key_id] = _ApiKey(account, secret_sha256, now)

    async def set_monthly_allowance(self, account: str, monthly_allowance: int | None
                                    ) -> bool:
        known = self._accounts.get(account)
        if known is None:
            return False
        known.monthly_allowance = monthly_allowance
        return True

    async def digest_account(self, call_sha256: str) -> str | None:
        index = self._by_digest.get(call_sha256)
        return None if index is None else self._accounts_of[index]

    async def list_api_keys(self, month: str) -> list[ApiKeyListing]:
        return [ApiKeyListing(key_id, k.account, self._accounts[k.account].monthly_allowance,
                              self._usage.get((k.account, month), 0), k.created, k.revoked)
                for key_id, k in sorted(self._keys.items(), key=lambda kv: kv[1].created)]

    async def revoke_api_key(self, key_id: str) -> bool:
        key = self._keys.get(key_id)
        if key is None or key.revoked is not None:
            return False
        key.revoked = time.time()
        return True

    # Server names ---------------------------------------------------------------------------

    def _hold(self, name: str) -> NameHold:
        held = self._names.get(name)
        skeleton = name_skeleton(name)
        return NameHold(None if held is None else held.account,
                        frozenset(r.account for r in self._names.values()
                                  if name_skeleton(r.name) == skeleton))

    async def server_names(self, account: str | None = None) -> list[ServerNameRecord]:
        return sorted((r for r in self._names.values() if account in (None, r.account)),
                      key=lambda r: r.name)

    async def grant_server_name(self, name: str, account: str) -> bool:
        if account not in self._accounts:
            raise StoreError(f"account {account!r} does not exist")
        async with self._lock:  # the log's write lock: no batch screens meanwhile
            hold = self._hold(name)
            if hold.holder == account:
                return False
            if hold.holder is not None or hold.confusable - {account}:
                raise ServerNameTaken(f"server name {name!r}, or one confusable with it, is "
                                      "held by another account")
            self._names[name] = ServerNameRecord(name, account, time.time())
            return True

    async def move_server_name(self, name: str, account: str) -> str:
        if account not in self._accounts:
            raise StoreError(f"account {account!r} does not exist")
        async with self._lock:
            held = self._names.get(name)
            if held is None:
                raise StoreError(f"no account holds server name {name!r}")
            self._names[name] = ServerNameRecord(name, account, time.time())
            return held.account

    # Receipt keys ---------------------------------------------------------------------------

    async def receipt_keys(self) -> list[ReceiptKeyRecord]:
        return sorted(self._receipt_keys.values(), key=lambda k: k.created)

    async def add_receipt_key(self, kid: str, jwk: str, created: float) -> bool:
        if kid in self._receipt_keys:
            return False
        self._receipt_keys[kid] = ReceiptKeyRecord(kid, jwk, created)
        return True
