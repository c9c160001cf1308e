"""The notary's behaviour, independent of HTTP: issue, look up and verify receipts.

Issuing: the receipt id and time are fixed first and the CBOR entry goes to the log's
sequencer. Inside the batch transaction, under the log's lock, :meth:`Notary.screen` decides
what must hold across processes (a digest logged already returns its receipt, to the account
it was logged under only; a server name held by another account, or looking like one, refuses;
a spent allowance refuses; no future ``issued_at``) and :meth:`Notary.hook` signs each receipt
and stores it next to its entry with the account's usage (``notary.store.base``, theory of
operation). So a receipt exists if and only if its entry does, two processes never log one
digest twice nor both claim one server name, and a retried digest finds its receipt.

The rules run as stages, in order: dedupe (:meth:`Notary._notarize`), halted, keys, quota,
append (:meth:`Notary._find_or_log`), and, under the lock, the screen's per-entry rules
(:class:`_BatchRules`); the clock policy is :mod:`notary.serving.clock_guard`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import structlog

from ledger.core.note import Ed25519Signer
from ledger.core.paths import ENTRIES_PATH
from ledger.core.tlog_proof import proof_text
from ledger.log.appended import Appended
from ledger.log.errors import LogHaltedError
from ledger.log.facade import Head, Log
from ledger.log.reader import LogReader
from ledger.log.sequencer import BatchObserver, Sequencer, WriterState
from ledger.process import tracing
from ledger.storage.base import CheckpointRecord, WriteTx
from notary.core.accounts import digests_match, month_of, seconds_until_next_month, split_api_key
from notary.core.entry import LogEntry
from notary.core.errors import NotaryBaseError
from notary.core.jwks import Jwks
from notary.core.paths import receipt_path
from notary.core.receipts import Receipt, ReceiptKey
from notary.core.server_names import NameHold, refusal_reason, skeletons
from notary.serving.clock_guard import ClockGuard, utc_now
from notary.serving.keys import Paths, current_receipt_key, jwks_from_records
from notary.serving.lifecycle import LogBook, log_path
from notary.serving.refusals import (
    DigestConflict,
    DigestTaken,
    NotFound,
    QuotaExceeded,
    ServerNotAllowed,
    ServiceRefusal,
    StoreCorrupt,
    Unauthorized,
    store_corrupt,
    withheld,
)
from notary.serving.root_key import root_for
from notary.store.base import (
    IssuedReceipt,
    NotaryStore,
    ReceiptWithheldError,
    Screening,
    UsageKey,
    notary_tx,
)

KEY_REFRESH_SECONDS = 5.0
"""How often the write path reads the receipt keys again, for a key another process made the
current one (``notary keys rotate``). What is published or checked against does not wait for it:
``/.well-known/jwks.json`` reads the keys on every request, and a receipt whose kid is not known
yet reads them at once (:meth:`Notary.jwks_with`)."""
SIGN_OFF_LOOP = 8
"""Receipts in a batch from which the hook signs them on a worker thread (:meth:`Notary.hook`)."""
_log = structlog.get_logger("notary")
_NO_DIGEST = b"\1" * 32  # what a malformed key is compared as: never a stored digest
_FREE = NameHold()  # a name nobody holds (one value: the screen asks for it per receipt)


class AlreadyLogged(NotaryBaseError):
    """The screen's answer for a digest another process logged first: its stored receipt
    (None when that receipt is withheld) and the account it was logged under."""

    def __init__(self, receipt: Receipt | None, account: str | None) -> None:
        super().__init__("already logged")
        self.receipt = receipt
        self.account = account


@dataclass(frozen=True)
class Account:
    name: str
    monthly_allowance: int | None
    key_id: str = ""  # the API key it was authenticated with (re-checked by the screen)


@dataclass
class _Pending:
    """One request's entry on its way through the sequencer (its context in the batch). The
    screen may give it the log's latest ``issued_at``; what the hook signs for it comes back
    to the request as :class:`Signed`, not on this object."""

    entry: LogEntry
    account: Account
    month: str
    now: datetime

    @property
    def usage_key(self) -> UsageKey:
        return (self.account.name, self.month)


class Signed(NamedTuple):
    """What the hook answers for one entry, handed to its request once the commit is durable."""

    receipt: Receipt  # signed, and stored with the entry
    batch: int  # how many entries its commit logged (for a trace)


_Found = tuple[Receipt, str | None, Appended[Signed] | None]
"""A digest's receipt (without a proof), the account it is logged under, and where its entry
landed when this request logged it (None: it was logged before). What the in-flight future of
a digest resolves to."""


def quota_exceeded(account: Account, now: datetime) -> QuotaExceeded:
    """The refusal for a write past ``account``'s monthly allowance."""
    return QuotaExceeded(
        f"account {account.name!r} has used its monthly allowance of "
        f"{account.monthly_allowance} writes; it resets at the start of the next UTC month",
        headers={"Retry-After": str(seconds_until_next_month(now))},
    )


class _BatchRules:
    """The screen's rules for one batch (:meth:`Notary.screen`), applied to its entries in
    order, so that each sees what the ones before it were admitted with: their usage, their
    digests, the server names they claimed and their ``issued_at``."""

    def __init__(self, found: Screening, revoked: set[str], clock: ServiceRefusal | None,
                 on_clock_refusal: Callable[[], None] | None) -> None:
        self.found, self.revoked, self.clock = found, revoked, clock
        self.on_clock_refusal = on_clock_refusal
        self.holds = dict(found.servers)
        self.skeleton_of = skeletons(self.holds)
        self.tail = found.last_issued_at
        self.admitted: dict[UsageKey, int] = {}
        self.digests: set[str] = set()  # admitted in this batch (one account's: see notarize)

    def verdict(self, c: _Pending) -> Exception | bytes | None:
        """The entry's answer: the refusal of the first rule it breaks, in order (keys, dedupe,
        server name, quota, clock), else what :meth:`_admit` logs."""
        if c.account.key_id in self.revoked:  # keys: revoked since the request was read
            return Unauthorized("this API key has been revoked", invalid_token=True)
        digest = c.entry.call_sha256_hex
        if digest in self.found.logged:  # dedupe: another process logged it first
            return AlreadyLogged(self.found.logged[digest], self.found.logged_by.get(digest))
        if digest in self.digests:  # dedupe: another account's request admitted it just before
            return DigestTaken()
        server = c.entry.server
        refused = refusal_reason(c.account.name, self.holds.get(server, _FREE))
        if refused is not None:
            return ServerNotAllowed(
                f"this API key's account may not notarize under the server name "
                f"{server!r}: {refused} (the first account to notarize under a name "
                "holds it; the operator can grant names with `notary names grant`)")
        allowance = c.account.monthly_allowance
        taken = self.admitted.get(c.usage_key, 0)
        if allowance is not None and self.found.usage.get(c.usage_key, 0) + taken >= allowance:
            return quota_exceeded(c.account, c.now)
        if self.clock is not None:
            if self.on_clock_refusal is not None:
                self.on_clock_refusal()
            return self.clock
        self.admitted[c.usage_key] = taken + 1
        self.digests.add(digest)
        return self._admit(c)

    def _admit(self, c: _Pending) -> bytes | None:
        """Log the entry: it claims its server name if free, and takes the log's latest
        ``issued_at`` if its own is earlier (then its entry is encoded again: the bytes)."""
        self._claim(c.entry.server, c.account.name)
        if self.tail is not None and c.entry.issued_at < self.tail:
            c.entry = dataclasses.replace(c.entry, issued_at=self.tail)
            return c.entry.encode()
        self.tail = c.entry.issued_at
        return None

    def _claim(self, server: str, account: str) -> None:
        """A receipt of this batch takes ``server`` (if free): later requests of the same
        batch see the claim, on that name and on every name confusable with it."""
        if self.holds.get(server, _FREE).holder is not None:
            return
        for name, hold in self.holds.items():
            if self.skeleton_of[name] == self.skeleton_of[server]:
                self.holds[name] = hold.with_claim(name, server, account)


class Notary:
    """The running notary on one store and its log (open it with
    :func:`notary.serving.startup.open_notary`).

    It builds the log's writer itself, since the writer's batch callbacks are its
    :meth:`screen` and :meth:`hook`; :meth:`start` reads the receipt keys and starts it.
    """

    def __init__(self, store: NotaryStore, paths: Paths, base_url: str, signer: Ed25519Signer,
                 *, max_batch: int = 4096, observer: BatchObserver | None = None,
                 trusted: CheckpointRecord | None = None, root: Ed25519Signer | None = None,
                 sign_off_loop: bool = True) -> None:
        self.store = store
        #: Whether a batch of SIGN_OFF_LOOP receipts or more is signed on a worker thread
        #: (:meth:`hook`); False for a store whose commit the event loop drives while it holds
        #: a lock other processes wait on (PostgreSQL).
        self.sign_off_loop = sign_off_loop
        self.paths = paths
        self.base_url = base_url.rstrip("/")
        #: Every log of the store (``signer`` is the active one's key, ``root`` log 0's).
        self.logs = LogBook(store, root or signer, reload=lambda r: root_for(paths, r),
                            key_file=str(paths.log_key))
        reader = LogReader(store)
        #: The log's one writer: its contexts are the requests' pending receipts, which the
        #: screen admits and the hook signs, inside the transaction that commits their entries.
        self.sequencer: Sequencer[_Pending, Signed] = Sequencer(
            store, signer, reader=reader, max_batch=max_batch, hook=self.hook,
            screen=self.screen, observer=observer, trusted=trusted,
            on_roll=self.logs.signer, on_switched=self._switched,
            poll_rolls=lambda: self.logs.rolled(self.sequencer.log_number))
        self.log = Log(store, signer.verifier(), reader, self.sequencer)
        #: Told the new active log's key after a roll (the app re-keys its ML-DSA-44 line).
        self.on_log_switch: list[Callable[[Ed25519Signer], None]] = []
        #: A frozen log's final checkpoint dual-signed (the app's, when checkpoints are).
        self.frozen_note: Callable[[Log, Head], bytes] | None = None
        #: Where a stored receipt's proof may lead instead of the head, best first: each gives
        #: (size, note) at the head it is passed, or None. Witnessing puts its newest witnessed
        #: checkpoint first; the log's dual-signed (ML-DSA-44) checkpoints come next.
        self.published_checkpoints: list[Callable[[Head], tuple[int, bytes] | None]] = []
        self.jwks = Jwks({"keys": []})
        self._current: ReceiptKey | None = None
        self._kids: list[str] = []
        self._keys_read = 0.0
        # Key reads are serial: started and finished ones are counted, so that a caller can
        # tell whether a read that started after it arrived has finished (and share it).
        self._keys_lock = asyncio.Lock()
        self._key_reads_started = 0
        self._key_reads_done = 0
        #: Digests on their way to the log, shared by concurrent requests of one account for
        #: one digest. Keyed by account too: another account's request must never get this
        #: one's answer (its refusal, say), so it goes to the batch, whose screen decides.
        self._inflight: dict[tuple[str, str], asyncio.Future[_Found]] = {}
        #: Writes queued and not yet committed, per account and month: counted against the
        #: allowance before the store has them.
        self._reserved: dict[UsageKey, int] = {}
        #: The clock receipts are stamped with and the log's latest time is checked against.
        self.clock: Callable[[], datetime] = utc_now
        #: Whether a batch may be stamped by :attr:`clock`, and why not (for /healthz).
        self.clock_guard = ClockGuard()
        #: Called once per request refused for the clock (a metric).
        self.on_clock_refusal: Callable[[], None] | None = None

    async def start(self) -> None:
        """Read the receipt keys, then start the log's writer (which checks the stored tree)."""
        await self.refresh_keys(force=True)
        await self.logs.refresh(force=True)
        await self.sequencer.start()

    def _switched(self, signer: Ed25519Signer) -> None:
        """The writer moved to the next log (a roll): readers follow it."""
        assert self.sequencer.reader is not None
        self.log.switch(signer.verifier(), self.sequencer.reader)
        for told in self.on_log_switch:
            told(signer)
        _log.info("log_switched", origin=signer.name)

    # Keys -----------------------------------------------------------------------------------

    async def refresh_keys(self, force: bool = False) -> None:
        """Pick up keys added by another process (``notary keys rotate``, another frontend's
        first start): read them again if ``force``, or :data:`KEY_REFRESH_SECONDS` after the
        last read."""
        if force or time.monotonic() - self._keys_read >= KEY_REFRESH_SECONDS:
            await self.reread_keys()

    async def reread_keys(self) -> None:
        """Read the keys from the store, in a read that starts after this call.

        Single-flight: reads run one at a time, and every caller that arrived while one was
        running shares the next, so a flood of requests costs one small read at a time, never
        one each at once.
        """
        wanted = self._key_reads_started + 1  # the first read that starts after now
        async with self._keys_lock:
            if self._key_reads_done >= wanted:
                return
            self._key_reads_started += 1
            number = self._key_reads_started
            self._keys_read = time.monotonic()
            records = await self.store.receipt_keys()
            if not records:
                raise RuntimeError("no receipt key; the data directory was not initialised")
            kids = [r.kid for r in records]
            if kids != self._kids:
                self.jwks = jwks_from_records(records)
                self._current = current_receipt_key(self.paths, records)
                self._kids = kids
            self._key_reads_done = number

    async def jwks_with(self, kid: str) -> Jwks:
        """The receipt keys, read again first if ``kid`` is not among them: a receipt signed
        by a key another frontend registered since this one last read the keys. ``kid`` comes
        from a stored receipt (whose key the store holds), so once read it is known."""
        if kid not in self.jwks:
            await self.reread_keys()
        return self.jwks

    @property
    def current_key(self) -> ReceiptKey:
        assert self._current is not None, "refresh_keys() first"
        return self._current

    # Auth -----------------------------------------------------------------------------------

    async def authenticate(self, authorization: str | None) -> Account:
        """The account of a valid ``Bearer`` API key, else :class:`Unauthorized`.

        The scheme is case-insensitive (RFC 9110 §11.1). Every well-formed or malformed key
        costs the same: one lookup that returns a row either way (a dummy one for an unknown
        key id) and one constant-time comparison, so timing does not reveal whether a key id
        exists.
        """
        scheme, _, credentials = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        key_id, presented = split_api_key(credentials.strip()) or ("", _NO_DIGEST)
        row = await self.store.api_key(key_id)
        # Compare even when the key is unknown, so timing says nothing about which part failed.
        ok = digests_match(_NO_DIGEST if row is None else row.secret_sha256, presented)
        if row is None or not ok:
            raise Unauthorized("invalid API key", invalid_token=True)
        if row.revoked is not None:
            raise Unauthorized("this API key has been revoked", invalid_token=True)
        return Account(row.account, row.monthly_allowance, row.key_id)

    # Issue ----------------------------------------------------------------------------------

    def entry_url(self, index: int, log: int = 0) -> str:
        """Where a receipt issued now points for its entry (old receipts keep theirs)."""
        return f"{self.entry_url_prefix(log)}{index}"

    def entry_url_prefix(self, log: int = 0) -> str:
        """:meth:`entry_url` without the index."""
        return f"{self.base_url}{log_path(log)}{ENTRIES_PATH}"

    def receipt_url(self, receipt_id: str) -> str:
        return self.base_url + receipt_path(receipt_id)

    async def notarize(self, account: Account, server: str, tool: str, call_sha256: str
                       ) -> tuple[Receipt, bool]:
        """(receipt with proof, newly issued?). A known digest returns its receipt, uncounted.

        While tracing, in a span ``notary.notarize`` (the commit's span is a child of the
        first request of its batch: ledger.log.sequencer)."""
        if tracing.TRACER is None:
            return await self._notarize(account, server, tool, call_sha256)
        with tracing.TRACER.start_as_current_span("notary.notarize") as span:
            receipt, created = await self._notarize(account, server, tool, call_sha256)
            span.set_attributes({"notary.receipt.id": receipt.id, "notary.receipt.new": created,
                                 "notary.log.origin": receipt.origin,
                                 "notary.log.index": receipt.index})
            return receipt, created

    async def _notarize(self, account: Account, server: str, tool: str, call_sha256: str
                        ) -> tuple[Receipt, bool]:
        """:meth:`notarize`.

        The in-flight future is registered before the first await, so concurrent requests of
        one account for one digest share one entry however the store's reads are scheduled;
        it is resolved here and nowhere else, as soon as the digest's receipt is known.
        Requests of different accounts never share it: the batch's screen decides between
        them (the first admitted logs the digest; the other is :class:`DigestTaken`). This is
        the first stage, dedupe; :meth:`_find_or_log` runs the others.
        """
        flight = (account.name, call_sha256)
        waiting = self._inflight.get(flight)
        if waiting is not None:
            receipt, owner, _ = await asyncio.shield(waiting)
            return await self._logged_before(receipt, owner, account, server, tool), False
        fut: asyncio.Future[_Found] = self.sequencer.loop.create_future()
        self._inflight[flight] = fut
        try:
            try:
                found = await self._find_or_log(account, server, tool, call_sha256)
            except BaseException as e:
                fut.set_exception(e)
                fut.exception()  # retrieved: waiters, if any, get it too
                raise
            fut.set_result(found)
            receipt, owner, appended = found
            if appended is None:
                return await self._logged_before(receipt, owner, account, server, tool), False
            proof = appended.proof
            if proof is None:  # the batch's proofs could not be computed together
                proof = tuple(await self.log.reader.inclusion_proof(appended.index,
                                                                    appended.size))
            return self._complete(receipt, proof, appended.checkpoint), True
        finally:
            del self._inflight[flight]

    async def _find_or_log(self, account: Account, server: str, tool: str, call_sha256: str
                           ) -> _Found:
        """Log a new entry for the digest, unless it is logged already.

        Whether it is, is decided by the batch's screen, under the log's lock (it must be
        decided there anyway, since another process may log it meanwhile), so a new digest
        costs no read of its own; only a request that would be refused before it is queued
        (writes stopped, allowance spent) looks first, because a known digest is answered with
        its receipt even then. The write is reserved against the allowance from before the
        check until its batch has committed (or refused it), when the store counts it.

        The stages after :meth:`_notarize`'s dedupe, in order: halted, keys, quota
        (:meth:`_within_allowance`), append (:meth:`_append`; under the lock, the screen's
        :class:`_BatchRules`).
        """
        status = self.sequencer.status
        if status.state is WriterState.HALTED:  # halted: only a logged digest is answered
            return await self._logged_or(call_sha256, store_corrupt(status.reason))
        if time.monotonic() - self._keys_read >= KEY_REFRESH_SECONDS:  # keys: a rotation
            await self.refresh_keys()
        now = self.clock()
        key = (account.name, month_of(now))
        self._reserved[key] = self._reserved.get(key, 0) + 1
        try:
            if await self._within_allowance(account, key):
                entry = LogEntry.fresh(server, tool, bytes.fromhex(call_sha256), now)
                return await self._append(_Pending(entry, account, key[1], now))
        finally:
            self._reserved[key] -= 1
        # Over the allowance even by this process's count: refused, unless logged already.
        return await self._logged_or(call_sha256, quota_exceeded(account, now))

    async def _within_allowance(self, account: Account, key: UsageKey) -> bool:
        """The quota stage: whether the account's writes this month, stored and reserved by
        this process (this one's included), stay within its allowance. The screen decides
        again under the lock, with what other processes stored meanwhile."""
        return account.monthly_allowance is None or \
            await self.store.usage(*key) + self._reserved[key] <= account.monthly_allowance

    async def _append(self, pending: _Pending) -> _Found:
        """The append stage: the entry goes to the log's writer, whose screen admits it (or
        answers with the receipt another process logged for the digest meanwhile) and whose
        hook signs its receipt in the commit."""
        try:
            appended = await self.sequencer.append(pending.entry.encode(), pending, proof=True)
        except AlreadyLogged as logged:  # by another process, under the log's lock
            if logged.receipt is None:
                raise withheld() from None
            return logged.receipt, logged.account, None
        except LogHaltedError as e:
            raise store_corrupt(str(e)) from None
        signed = appended.result
        assert signed is not None  # the hook signed it in the commit
        if tracing.TRACER is not None:
            tracing.annotate({"notary.batch.size": signed.batch})
        return signed.receipt, pending.account.name, appended

    async def _logged_or(self, call_sha256: str, refusal: ServiceRefusal) -> _Found:
        """The digest's stored receipt and its account, for a request refused before it was
        queued; ``refusal`` if the digest is not logged."""
        try:
            receipt = await self.store.receipt_by_digest(call_sha256)
        except ReceiptWithheldError:
            raise withheld() from None
        if receipt is None:
            raise refusal
        return receipt, await self.store.digest_account(call_sha256), None

    async def _logged_before(self, receipt: Receipt, owner: str | None, account: Account,
                             server: str, tool: str) -> Receipt:
        """The answer for a digest logged under ``owner``: its receipt with a proof to the
        newest checkpoint, if this account's and for this server and tool."""
        self._check_same(receipt, owner, account, server, tool)
        return await self.with_proof(receipt)

    @staticmethod
    def _complete(receipt: Receipt, proof: Sequence[bytes], checkpoint: bytes) -> Receipt:
        return receipt.with_proof(proof_text(receipt.index, proof, checkpoint))

    async def proof_target(self, receipt: Receipt) -> tuple[Head, int, bytes]:
        """The head, and the checkpoint (size, note) a stored receipt's proof leads to: the
        best published one of the receipt's log that covers it (cosigned, or dual-signed),
        else the head. Only for a receipt of the active log (:meth:`with_proof` handles a
        frozen log's)."""
        head = await self.log.head()
        if head is None or head.size <= receipt.index:
            # Logged by another process after this one last read the head: read it now (the
            # receipt is committed, so is a checkpoint that covers it).
            head = await self.log.head(0)
        assert head is not None and head.size > receipt.index
        for published in self.published_checkpoints:
            found = published(head)
            if found is not None and receipt.index < found[0] <= head.size \
                    and found[1].startswith(head.note.split(b"\n", 1)[0] + b"\n"):
                return head, *found  # upgraded: cosignatures, or the ML-DSA-44 line
        return head, head.size, head.note

    async def with_proof(self, receipt: Receipt) -> Receipt:
        """The stored receipt plus a proof to the newest checkpoint (a frozen log's final one)."""
        if receipt.origin != self.log.origin:
            frozen = await self.logs.frozen_proof(receipt.origin, receipt.index,
                                                  self.frozen_note)
            if frozen is not None:
                return self._complete(receipt, *frozen)
            await self.sequencer.follow()  # of a log another process rolled to: follow it
            if receipt.origin != self.log.origin:
                raise StoreCorrupt(f"receipt {receipt.id} is in no log of this store")
        _, size, note = await self.proof_target(receipt)
        proof = await self.log.reader.inclusion_proof(receipt.index, size)
        return self._complete(receipt, proof, note)

    @staticmethod
    def _check_same(receipt: Receipt, owner: str | None, account: Account, server: str,
                    tool: str) -> None:
        """A logged digest answers only the account it was logged under, for its server and
        tool (another account's receipt never stands in for this one's)."""
        if owner != account.name:
            raise DigestTaken()
        if receipt.server != server or receipt.tool != tool:
            raise DigestConflict(
                "this call_sha256 was already notarized for another server or tool"
            )

    async def screen(self, tx: WriteTx, pendings: Sequence[_Pending]
                     ) -> list[Exception | bytes | None]:
        """Inside the batch transaction, under the log's lock: refuse what another process
        made impossible since the request was read (its digest logged, its allowance spent),
        and issue no receipt earlier than the latest one logged.

        That last rule makes ``issued_at`` non-decreasing along the log, across processes and
        clocks: an entry stamped before a later-stamped one that was logged first takes that
        one's time (a few milliseconds at most, the commit's wait). Time order is then log
        order, which is what lets a store search by time without an index of times. A latest
        time too far past this process's clock, or this clock too far ahead of the database
        server's, refuses the batch instead (:mod:`notary.serving.clock_guard`), so no receipt
        carries a time in the future of a frontend's clock.

        A request under a server name that another account holds, or that looks like one
        another account holds, is refused (:class:`ServerNotAllowed`); one under a free name
        claims it for its account (the store records the claim with the receipt), and the
        batch's later requests see that claim.
        """
        found = await notary_tx(tx).screen(
            [p.entry.call_sha256_hex for p in pendings],
            {p.usage_key for p in pendings if p.account.monthly_allowance is not None},
            {p.entry.server for p in pendings})
        revoked = await self._revoked_keys(pendings) if found.keys_changed else set()
        clock = self.clock_guard.refusal(found.last_issued_at, found.store_clock, self.clock())
        rules = _BatchRules(found, revoked, clock, self.on_clock_refusal)
        return [rules.verdict(p) for p in pendings]

    def clock_problem(self) -> str | None:
        """Why writes are refused for the clock (for /healthz), or None: :class:`ClockGuard`."""
        return self.clock_guard.problem(self.clock())

    async def _revoked_keys(self, pendings: Sequence[_Pending]) -> set[str]:
        """The batch's API keys that are revoked (or gone) now: the store said keys changed
        since its cache was checked, so what authenticated a request may no longer hold."""
        out = set()
        for key_id in {p.account.key_id for p in pendings if p.account.key_id}:
            row = await self.store.api_key(key_id)
            if row is None or row.revoked is not None:
                out.add(key_id)
        return out

    async def hook(self, tx: WriteTx, items: Sequence[tuple[int, _Pending]]) -> list[Signed]:
        """Inside the log's batch transaction: sign and store each receipt, count usage; each
        entry's receipt, which the writer hands to its request once the commit is durable."""
        key = self.current_key
        origin = self.sequencer.origin  # the log written now (a roll moved it in this batch)
        prefix = self.entry_url_prefix(notary_tx(tx).log_number)
        entries = [(index, pending.entry) for index, pending in items]
        # A batch of SIGN_OFF_LOOP receipts or more is signed on a worker thread: libsodium
        # signs without the GIL, so the loop parses and queues the next requests meanwhile on
        # the other core (measured on a loaded 2-core AMD EPYC: the loop's CPU a receipt 20-34
        # µs lower at 16 and 64 in flight, the process's the same or up to ~10 µs more, for
        # the hand-off; benchmarks/docs/http_notarize.md). A small batch, whose request waits
        # for it, is signed here: the hand-off would cost it more than the signing. So is
        # every batch on PostgreSQL (sign_off_loop False): there the loop drives the commit's
        # round trips while the log's lock, which every frontend queues on, is held, and the
        # hand-off to a thread and back made that hold longer (AMD EPYC, 2 vCPUs, one run,
        # alternating: one frontend at 64 connections 1.22-1.40x the receipts/s, 11-24 µs
        # less CPU a receipt; benchmarks/docs/pg_frontends.md).
        sign = functools.partial(key.sign_entries, entries, origin=origin, url_prefix=prefix)
        signed = sign() if len(entries) < SIGN_OFF_LOOP or not self.sign_off_loop else \
            await asyncio.get_running_loop().run_in_executor(None, sign)
        issued: list[IssuedReceipt] = []
        usage: dict[UsageKey, int] = {}
        for (_, pending), receipt in zip(items, signed, strict=True):
            issued.append(IssuedReceipt(receipt, pending.account.name))
            month = pending.usage_key
            usage[month] = usage.get(month, 0) + 1
        await notary_tx(tx).add_receipts(issued, usage)
        return [Signed(receipt, len(items)) for receipt in signed]

    # Read and verify ------------------------------------------------------------------------

    async def _stored(self, receipt: Receipt | None, what: str) -> Receipt:
        if receipt is None:
            raise NotFound(what + await self._reclaimed_hint())
        return await self.with_proof(receipt)

    async def _reclaimed_hint(self) -> str:
        """For a 404 of a notary that pruned a log: its rows may have been reclaimed."""
        if any(r.min_index for r in await self.logs.refresh()):
            return (" (or it is below a pruned log's minimum index and its rows were "
                    "reclaimed: docs/lifecycle.md)")
        return ""

    async def get(self, receipt_id: str) -> Receipt:
        return await self.with_proof(await self.stored(receipt_id))

    async def stored(self, receipt_id: str) -> Receipt:
        """The stored receipt (without a proof), or :class:`NotFound`."""
        try:
            receipt = await self.store.receipt_by_id(receipt_id)
        except ReceiptWithheldError as e:
            raise NotFound(f"receipt {receipt_id!r} is withheld: its signed form could not be "
                           "recovered when the store was migrated") from e
        if receipt is None:
            raise NotFound(f"no receipt with id {receipt_id!r}{await self._reclaimed_hint()}")
        return receipt

    async def lookup(self, call_sha256: str) -> Receipt:
        try:
            receipt = await self.store.receipt_by_digest(call_sha256)
        except ReceiptWithheldError as e:
            raise NotFound("the receipt for this call_sha256 is withheld: its signed form "
                           "could not be recovered when the store was migrated") from e
        return await self._stored(receipt, "no receipt for this call_sha256")

    async def search(self, *, server: str | None, tool: str | None, since: str | None,
                     until: str | None, before: tuple[str, int] | None, limit: int
                     ) -> tuple[list[Receipt], tuple[str, int] | None]:
        """One page of signed receipts, newest first, without proofs (a page of proofs would
        cost an inclusion proof per row; a receipt's own URL gives one), and the
        ``(issued_at, index)`` the next page starts after, or None on the last page."""
        found = await self.store.search_receipts(server=server, tool=tool, since=since,
                                                 until=until, before=before, limit=limit + 1)
        page = found[:limit]
        last = (page[-1].issued_at, self.logs.position(page[-1].origin, page[-1].index)) \
            if len(found) > limit else None
        return page, last

