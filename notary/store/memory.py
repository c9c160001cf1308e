"""The notary's store in memory: the contract of ``notary.store.base`` for tests and throwaway
notaries (``notary serve --database memory:``). Nothing survives the process.

It keeps the same transaction semantics as the database backends: the batch's screen reads and
receipt rows happen under the transaction's lock, and its rows become visible together with
the tiles and checkpoint when it ends cleanly, never before and never after a failure.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import cast

from ledger.storage.base import StoreError
from ledger.storage.memory import MemoryLogs, MemoryStore, MemoryWriteTx
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
class _AccountRow:
    monthly_allowance: int | None
    created: float


@dataclass
class _ApiKey:
    account: str
    secret_sha256: bytes
    created: float
    revoked: float | None = None


@dataclass
class MemoryNotaryRows:
    """The notary's rows of a :class:`MemoryNotaryStore`: what it shares with its transactions,
    which add a batch's rows here once the batch ends cleanly."""

    receipts: dict[int, Receipt] = field(default_factory=dict)  # by position
    accounts_of: dict[int, str] = field(default_factory=dict)  # receipt position -> account
    names: dict[str, ServerNameRecord] = field(default_factory=dict)
    by_id: dict[str, int] = field(default_factory=dict)
    by_digest: dict[str, int] = field(default_factory=dict)
    accounts: dict[str, _AccountRow] = field(default_factory=dict)
    keys: dict[str, _ApiKey] = field(default_factory=dict)
    usage: dict[UsageKey, int] = field(default_factory=dict)
    receipt_keys: dict[str, ReceiptKeyRecord] = field(default_factory=dict)
    last_issued_at: str | None = None

    def hold(self, name: str) -> NameHold:
        held = self.names.get(name)
        skeleton = name_skeleton(name)
        return NameHold(None if held is None else held.account,
                        frozenset(r.account for r in self.names.values()
                                  if name_skeleton(r.name) == skeleton))


class MemoryNotaryWriteTx(MemoryWriteTx):
    def __init__(self, logs: MemoryLogs, rows: MemoryNotaryRows) -> None:
        super().__init__(logs)
        self._rows = rows
        self.receipts: list[IssuedReceipt] = []
        self.usage: dict[UsageKey, int] = {}

    async def screen(self, digests: Collection[str], usage: Collection[UsageKey],
                     servers: Collection[str] = ()) -> Screening:
        rows = self._rows
        logged: dict[str, Receipt | None] = {
            d: rows.receipts[rows.by_digest[d]] for d in digests if d in rows.by_digest}
        logged_by = {d: rows.accounts_of[rows.by_digest[d]] for d in logged}
        return Screening(logged, {k: rows.usage.get(k, 0) for k in usage},
                         rows.last_issued_at, logged_by=logged_by,
                         servers={n: rows.hold(n) for n in servers})

    async def add_receipts(self, receipts: Sequence[IssuedReceipt],
                           usage: Mapping[UsageKey, int]) -> None:
        unknown = ({r.account for r in receipts} | {a for a, _ in usage}) - \
            self._rows.accounts.keys()
        if unknown:
            raise StoreError(f"account {sorted(unknown)[0]!r} does not exist")
        self.receipts.extend(receipts)
        for key, n in usage.items():
            self.usage[key] = self.usage.get(key, 0) + n

    def committed(self) -> None:
        """The log's writes, then the receipts' rows (checked first: all or nothing)."""
        rows = self._rows
        at = position(self.log_number, 0)  # receipts are kept by position (notary.core.logs)
        for issued in self.receipts:
            r = issued.receipt
            if r.call_sha256 in rows.by_digest or r.id in rows.by_id \
                    or at + r.index in rows.receipts:
                raise RuntimeError(f"receipt {r.id} collides with a stored one")  # a bug upstream
        pairs = [(i.receipt, i.account) for i in self.receipts]
        claims = new_claims(pairs, {r.receipt.server: rows.names[r.receipt.server].account
                                    for r in self.receipts if r.receipt.server in rows.names})
        super().committed()
        for issued in self.receipts:
            r = issued.receipt
            rows.receipts[at + r.index] = r
            rows.by_id[r.id] = at + r.index
            rows.by_digest[r.call_sha256] = at + r.index
            rows.accounts_of[at + r.index] = issued.account
        for name, account in claims:
            rows.names[name] = ServerNameRecord(name, account, time.time())
        for key, n in self.usage.items():
            rows.usage[key] = rows.usage.get(key, 0) + n
        for issued in self.receipts:
            if rows.last_issued_at is None or issued.receipt.issued_at > rows.last_issued_at:
                rows.last_issued_at = issued.receipt.issued_at


class MemoryNotaryStore(MemoryStore):
    """Log tiles, checkpoints and the notary's rows in dictionaries."""

    def __init__(self) -> None:
        super().__init__()
        self._rows = MemoryNotaryRows()

    def _new_tx(self) -> MemoryNotaryWriteTx:
        return MemoryNotaryWriteTx(self._state, self._rows)

    def transaction(self) -> AbstractAsyncContextManager[MemoryNotaryWriteTx]:
        # _transaction yields what _new_tx made, which is a MemoryNotaryWriteTx here.
        return cast(AbstractAsyncContextManager[MemoryNotaryWriteTx], self._transaction())

    # Receipts -------------------------------------------------------------------------------

    async def receipt_by_id(self, receipt_id: str) -> Receipt | None:
        index = self._rows.by_id.get(receipt_id)
        return None if index is None else self._rows.receipts[index]

    async def receipt_by_digest(self, call_sha256: str) -> Receipt | None:
        index = self._rows.by_digest.get(call_sha256)
        return None if index is None else self._rows.receipts[index]

    async def search_receipts(self, *, server: str | None = None, tool: str | None = None,
                              since: str | None = None, until: str | None = None,
                              before: tuple[str, int] | None = None, limit: int = 20
                              ) -> list[Receipt]:
        found = sorted(((pos, r) for pos, r in self._rows.receipts.items()
                        if (server is None or r.server == server)
                        and (tool is None or r.tool == tool)
                        and in_window(r.issued_at, pos, since=since, until=until,
                                      before=before)),
                       key=lambda pr: (pr[1].issued_at, pr[0]), reverse=True)
        return [r for _, r in found[:max(limit, 0)]]

    # Accounts, API keys and usage -----------------------------------------------------------

    async def first_receipt(self, lo: int, hi: int) -> int | None:
        return min((p for p in self._rows.receipts if lo <= p < hi), default=None)

    async def reclaim_receipts(self, lo: int, hi: int,
                               keys: Sequence[tuple[int, str, str]]) -> int:
        gone = [p for p in self._rows.receipts if lo <= p < hi]
        for p in gone:
            receipt = self._rows.receipts.pop(p)
            self._rows.accounts_of.pop(p, None)
            if self._rows.by_id.get(receipt.id) == p:
                del self._rows.by_id[receipt.id]
            if self._rows.by_digest.get(receipt.call_sha256) == p:
                del self._rows.by_digest[receipt.call_sha256]
        return len(gone)

    async def free_bytes(self) -> int | None:
        return None

    async def api_key(self, key_id: str) -> ApiKeyRecord | None:
        key = self._rows.keys.get(key_id)
        if key is None:
            return None
        account = self._rows.accounts[key.account]
        return ApiKeyRecord(key_id, key.account, key.secret_sha256, key.revoked,
                            account.monthly_allowance)

    async def usage(self, account: str, month: str) -> int:
        return self._rows.usage.get((account, month), 0)

    async def create_api_key(self, account: str, monthly_allowance: int | None, key_id: str,
                             secret_sha256: bytes) -> None:
        if key_id in self._rows.keys:
            raise ValueError(f"API key {key_id} exists already")
        now = time.time()
        known = self._rows.accounts.get(account)
        if known is None:
            self._rows.accounts[account] = _AccountRow(monthly_allowance, now)
        elif monthly_allowance is not None and monthly_allowance != known.monthly_allowance:
            raise AllowanceConflict(account, known.monthly_allowance)
        self._rows.keys[key_id] = _ApiKey(account, secret_sha256, now)

    async def set_monthly_allowance(self, account: str, monthly_allowance: int | None
                                    ) -> bool:
        known = self._rows.accounts.get(account)
        if known is None:
            return False
        known.monthly_allowance = monthly_allowance
        return True

    async def digest_account(self, call_sha256: str) -> str | None:
        index = self._rows.by_digest.get(call_sha256)
        return None if index is None else self._rows.accounts_of[index]

    async def list_api_keys(self, month: str) -> list[ApiKeyListing]:
        return [ApiKeyListing(key_id, k.account, self._rows.accounts[k.account].monthly_allowance,
                              self._rows.usage.get((k.account, month), 0), k.created, k.revoked)
                for key_id, k in sorted(self._rows.keys.items(), key=lambda kv: kv[1].created)]

    async def revoke_api_key(self, key_id: str) -> bool:
        key = self._rows.keys.get(key_id)
        if key is None or key.revoked is not None:
            return False
        key.revoked = time.time()
        return True

    # Server names ---------------------------------------------------------------------------

    async def server_names(self, account: str | None = None) -> list[ServerNameRecord]:
        return sorted((r for r in self._rows.names.values() if account in (None, r.account)),
                      key=lambda r: r.name)

    async def grant_server_name(self, name: str, account: str) -> bool:
        if account not in self._rows.accounts:
            raise StoreError(f"account {account!r} does not exist")
        async with self._lock:  # the log's write lock: no batch screens meanwhile
            hold = self._rows.hold(name)
            if hold.holder == account:
                return False
            if hold.holder is not None or hold.confusable - {account}:
                raise ServerNameTaken(f"server name {name!r}, or one confusable with it, is "
                                      "held by another account")
            self._rows.names[name] = ServerNameRecord(name, account, time.time())
            return True

    async def move_server_name(self, name: str, account: str) -> str:
        if account not in self._rows.accounts:
            raise StoreError(f"account {account!r} does not exist")
        async with self._lock:
            held = self._rows.names.get(name)
            if held is None:
                raise StoreError(f"no account holds server name {name!r}")
            self._rows.names[name] = ServerNameRecord(name, account, time.time())
            return held.account

    # Receipt keys ---------------------------------------------------------------------------

    async def receipt_keys(self) -> list[ReceiptKeyRecord]:
        return sorted(self._rows.receipt_keys.values(), key=lambda k: k.created)

    async def add_receipt_key(self, kid: str, jwk: str, created: float) -> bool:
        if kid in self._rows.receipt_keys:
            return False
        self._rows.receipt_keys[kid] = ReceiptKeyRecord(kid, jwk, created)
        return True
