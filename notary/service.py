"""The notary's behaviour, independent of HTTP: issue, look up and verify receipts.

Issuing: the receipt id and time are fixed first, the CBOR entry goes to the log's sequencer,
and inside the batch transaction (``_hook``) the receipt is signed and stored next to the entry
and the account's usage is counted. So a receipt exists if and only if its entry does, and a
retried digest finds it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger.core.tlog_proof import ProofBundle
from ledger.http.errors import ApiError
from ledger.log import Log
from ledger.sequencer import LogHaltedError
from ledger.storage.base import WriteTx
from notary.core.accounts import digests_match, month_of, seconds_until_next_month, split_api_key
from notary.core.entry import LogEntry
from notary.core.ids import format_issued_at, new_receipt_id
from notary.core.receipts import Jwks, ReceiptKey, build_receipt
from notary.core.verification import Verdict, verify_receipt
from notary.keys import Paths, jwks_from_rows, load_receipt_key
from notary.store.sqlite import NotaryDB, ReceiptRow, insert_receipts

KEY_REFRESH_SECONDS = 5.0


class NotaryError(ApiError):
    """A refusal the HTTP layer renders as its JSON error (status and code per subclass)."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(type(self).status, type(self).code, message, headers)


class Unauthorized(NotaryError):
    status, code = 401, "unauthorized"


class QuotaExceeded(NotaryError):
    status, code = 429, "quota_exceeded"


class DigestConflict(NotaryError):
    status, code = 409, "digest_conflict"


class NotFound(NotaryError):
    status, code = 404, "not_found"


class StoreCorrupt(NotaryError):
    """Writes are stopped: damage was found in the stored log (the scrub, or a damaged page)."""

    status, code = 503, "store_corrupt"


def _store_corrupt(reason: str) -> StoreCorrupt:
    return StoreCorrupt(f"writes are stopped: the stored log is damaged ({reason}); the "
                        "operator must restore the newest backup and run `notary check`")


@dataclass(frozen=True)
class Account:
    name: str
    monthly_allowance: int | None


@dataclass
class _Pending:
    id: str
    server: str
    tool: str
    call_sha256: str
    issued_at: str
    account: str
    month: str
    row: ReceiptRow | None = None


class Notary:
    def __init__(self, db: NotaryDB, paths: Paths, base_url: str) -> None:
        self.db = db
        self.paths = paths
        self.base_url = base_url.rstrip("/")
        self.log: Log | None = None
        #: Set by witnessing: (size, note) of the newest witnessed checkpoint, or None.
        self.published_checkpoint: Callable[[], tuple[int, bytes] | None] | None = None
        self.jwks = Jwks({"keys": []})
        self._current: ReceiptKey | None = None
        self._keys_read = 0.0
        self._inflight: dict[str, asyncio.Future[ReceiptRow]] = {}
        self._reserved: dict[tuple[str, str], int] = {}

    # Keys -----------------------------------------------------------------------------------

    async def refresh_keys(self, force: bool = False) -> None:
        """Pick up keys added by ``notary keys rotate`` in another process."""
        now = time.monotonic()
        if not force and now - self._keys_read < KEY_REFRESH_SECONDS:
            return
        self._keys_read = now
        rows = await self.db.receipt_keys()
        if not rows:
            raise RuntimeError("no receipt key; the data directory was not initialised")
        newest = rows[-1][0]
        if len(rows) != len(self.jwks) or self._current is None or self._current.kid != newest:
            self.jwks = jwks_from_rows(rows)
            if self._current is None or self._current.kid != newest:
                self._current = load_receipt_key(self.paths, newest)

    @property
    def current_key(self) -> ReceiptKey:
        assert self._current is not None, "refresh_keys() first"
        return self._current

    # Auth -----------------------------------------------------------------------------------

    async def authenticate(self, authorization: str | None) -> Account:
        if not authorization or not authorization.startswith("Bearer "):
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        parsed = split_api_key(authorization[7:].strip())
        row = await self.db.api_key(parsed[0]) if parsed else None
        # Compare even when the row is missing so timing says nothing about which part failed.
        stored = row.secret_sha256 if row else b"\0" * 32
        ok = digests_match(stored, parsed[1] if parsed else b"\1" * 32)
        if row is None or not ok:
            raise Unauthorized("invalid API key")
        if row.revoked is not None:
            raise Unauthorized("this API key has been revoked")
        return Account(row.account, row.monthly_allowance)

    # Issue ----------------------------------------------------------------------------------

    def entry_url(self, index: int) -> str:
        return f"{self.base_url}/v1/ledger/entries/{index}"

    def receipt_url(self, receipt_id: str) -> str:
        return f"{self.base_url}/v1/tool-calls/{receipt_id}"

    def receipt_from_row(self, row: ReceiptRow) -> dict[str, object]:
        assert self.log is not None
        receipt = build_receipt(
            id=row.id, server=row.server, tool=row.tool, call_sha256_hex=row.call_sha256,
            issued_at=row.issued_at, origin=self.log.origin, index=row.index,
            entry_url=self.entry_url(row.index), check=False,
        )
        receipt["signature"] = {"alg": "EdDSA", "kid": row.kid, "sig": row.sig}
        return receipt

    async def notarize(self, account: Account, server: str, tool: str, call_sha256: str
                       ) -> tuple[dict[str, object], bool]:
        """(receipt with proof, newly issued?). A known digest returns its receipt, uncounted.

        The in-flight future is registered before the first await, so concurrent requests for
        one digest share one entry however the store's reads are scheduled.
        """
        waiting = self._inflight.get(call_sha256)
        if waiting is not None:
            row = await asyncio.shield(waiting)
            self._check_same(row, server, tool)
            return await self.with_proof(row), False
        fut: asyncio.Future[ReceiptRow] = asyncio.get_running_loop().create_future()
        self._inflight[call_sha256] = fut
        try:
            result = await self._notarize_new(account, server, tool, call_sha256, fut)
        except BaseException as e:
            if not fut.done():
                fut.set_exception(e)
                fut.exception()  # retrieved: waiters, if any, get it too
            raise
        finally:
            del self._inflight[call_sha256]
        return result

    async def _notarize_new(self, account: Account, server: str, tool: str, call_sha256: str,
                            fut: asyncio.Future[ReceiptRow]) -> tuple[dict[str, object], bool]:
        existing = await self.db.receipt_by_digest(call_sha256)
        if existing is not None:
            fut.set_result(existing)
            self._check_same(existing, server, tool)
            return await self.with_proof(existing), False
        assert self.log is not None and self.log.sequencer is not None
        if self.log.sequencer.halted is not None:
            raise _store_corrupt(self.log.sequencer.halted)
        await self.refresh_keys()
        now = datetime.now(UTC)
        month = month_of(now)
        await self._reserve(account, month, now)
        pending = _Pending(new_receipt_id(), server, tool, call_sha256, format_issued_at(now),
                           account.name, month)
        try:
            entry = LogEntry(id=pending.id, server=server, tool=tool,
                             call_sha256=bytes.fromhex(call_sha256), issued_at=pending.issued_at)
            appended = await self.log.sequencer.append(entry.encode(), pending)
        except LogHaltedError as e:
            raise _store_corrupt(str(e)) from None
        finally:
            # Committed writes are counted in the database by now; failed ones never were.
            self._reserved[(account.name, month)] -= 1
        assert pending.row is not None
        fut.set_result(pending.row)
        proof = await self.log.reader.inclusion_proof(appended.index, appended.size)
        return self._complete(pending.row, appended.index, proof, appended.checkpoint), True

    def _complete(self, row: ReceiptRow, index: int, proof: Sequence[bytes], checkpoint: bytes
                  ) -> dict[str, object]:
        receipt = self.receipt_from_row(row)
        receipt["proof"] = ProofBundle(index, tuple(proof), checkpoint).encode().decode()
        return receipt

    async def with_proof(self, row: ReceiptRow) -> dict[str, object]:
        """The stored receipt plus a proof to the newest checkpoint."""
        assert self.log is not None
        head = await self.log.head()
        assert head is not None and head.size > row.index
        size, note = head.size, head.note
        witnessed = self.published_checkpoint() if self.published_checkpoint else None
        if witnessed is not None and row.index < witnessed[0] <= head.size:
            size, note = witnessed  # upgraded: the proof's checkpoint carries cosignatures
        proof = await self.log.reader.inclusion_proof(row.index, size)
        return self._complete(row, row.index, proof, note)

    @staticmethod
    def _check_same(row: ReceiptRow, server: str, tool: str) -> None:
        if row.server != server or row.tool != tool:
            raise DigestConflict(
                "this call_sha256 was already notarized for another server or tool"
            )

    async def _reserve(self, account: Account, month: str, now: datetime) -> None:
        """Count the write before it happens, so concurrent requests cannot overspend."""
        key = (account.name, month)
        self._reserved[key] = self._reserved.get(key, 0) + 1
        if account.monthly_allowance is None:
            return
        used = await self.db.usage(account.name, month) + self._reserved[key]
        if used > account.monthly_allowance:
            self._reserved[key] -= 1
            raise QuotaExceeded(
                f"account {account.name!r} has used its monthly allowance of "
                f"{account.monthly_allowance} writes; it resets at the start of the next UTC month",
                headers={"Retry-After": str(seconds_until_next_month(now))},
            )

    async def hook(self, tx: WriteTx, items: Sequence[tuple[int, Any]]) -> None:
        """Inside the log's batch transaction: sign and store each receipt, count usage."""
        assert self.log is not None
        key = self.current_key
        rows: list[ReceiptRow] = []
        usage: dict[tuple[str, str], int] = {}
        for index, pending in items:
            if not isinstance(pending, _Pending):
                continue
            unsigned = build_receipt(
                id=pending.id, server=pending.server, tool=pending.tool,
                call_sha256_hex=pending.call_sha256, issued_at=pending.issued_at,
                origin=self.log.origin, index=index, entry_url=self.entry_url(index),
            )
            row = ReceiptRow(pending.id, pending.call_sha256, index, pending.server,
                             pending.tool, pending.issued_at, key.kid,
                             key.signature_for(unsigned), pending.account)
            pending.row = row
            rows.append(row)
            usage[(pending.account, pending.month)] = usage.get(
                (pending.account, pending.month), 0) + 1
        await insert_receipts(tx.handle, rows, usage)

    # Read and verify ------------------------------------------------------------------------

    async def get(self, receipt_id: str) -> dict[str, object]:
        row = await self.db.receipt_by_id(receipt_id)
        if row is None:
            raise NotFound(f"no receipt with id {receipt_id!r}")
        return await self.with_proof(row)

    async def lookup(self, call_sha256: str) -> dict[str, object]:
        row = await self.db.receipt_by_digest(call_sha256)
        if row is None:
            raise NotFound("no receipt for this call_sha256")
        return await self.with_proof(row)

    async def search(self, *, server: str | None, tool: str | None, since: str | None,
                     until: str | None, before: tuple[str, int] | None, limit: int
                     ) -> tuple[list[dict[str, object]], tuple[str, int] | None]:
        """One page of signed receipts, newest first, without proofs (a page of proofs would
        cost an inclusion proof per row; a receipt's own URL gives one), and the
        ``(issued_at, index)`` the next page starts after, or None on the last page."""
        rows = await self.db.search_receipts(server=server, tool=tool, since=since, until=until,
                                             before=before, limit=limit + 1)
        page = rows[:limit]
        last = (page[-1].issued_at, page[-1].index) if len(rows) > limit else None
        return [self.receipt_from_row(r) for r in page], last

    async def verify(self, receipt_id: str, record: dict[str, object]
                     ) -> tuple[Verdict, dict[str, object]]:
        """Hash the record in memory against the stored receipt; nothing is written or logged."""
        assert self.log is not None
        await self.refresh_keys()
        receipt = await self.get(receipt_id)
        verdict = verify_receipt(receipt, record=record, jwks=self.jwks,
                                 log_verifier=self.log.verifier)
        return verdict, receipt
