"""The notary's storage contract: the log's store (``ledger.storage.base``) plus the notary's
own tables, accounts, API keys, usage, receipt keys and receipts, as typed methods.

Every backend (``memory``, ``sqlite``, ``postgres``) implements :class:`NotaryStore`;
the service never sees SQL or a connection. The rows are the dataclasses below; a receipt is
the core :class:`~notary.core.receipts.Receipt`, returned exactly as it was signed.

Theory of operation
-------------------
The notary's rows live in the same database as the log, so that a receipt exists if and only
if its log entry does. One batch of the sequencer is one :meth:`NotaryStore.transaction`:

1. **Lock.** Opening the transaction takes the log's single-writer lock (SQLite
   ``BEGIN IMMEDIATE``; PostgreSQL ``SELECT … FROM log_state WHERE … FOR UPDATE`` on the log's
   one state row, which every writer locks first, so writers queue there and readers never
   wait). The sequencer re-reads the checkpoint and catches up if another process moved it.
2. **Screen.** :meth:`NotaryWriteTx.screen` reads, under that lock, which of the batch's digests
   are logged already (and under which account), which accounts hold the batch's server names
   and their look-alikes, and how much of each account's monthly allowance is spent. Since no other
   process can commit until this transaction ends, what it answers is still true at the commit:
   duplicates, server names and quota are decided here, never on a read from before the lock
   (those are only a fast path that refuses early). Two processes therefore never log one
   digest twice, both claim one free server name, or overspend an allowance.
3. **Write.** The sequencer integrates the admitted entries and signs one checkpoint; inside
   the same transaction :meth:`NotaryWriteTx.add_receipts` adds each signed receipt and the
   usage it counts.
4. **Commit.** Tiles, bundles, checkpoint, receipts and usage become durable together or not
   at all; only then is any caller answered.

Reads outside a transaction see committed rows only; administration (API keys, receipt keys)
uses short transactions of its own and may run in another process beside the server.

A stored receipt is served exactly as signed: a backend stores what cannot be rebuilt (the
signature, the key id, the ``origin`` and ``entry_url`` it was signed with) and may rebuild the
other members from the log entry at its index, which holds exactly those values. No member is
ever rebuilt from current settings.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol, cast, runtime_checkable

from ledger.storage.base import (
    RollingStore,
    RollingTx,
    StoreError,
    StoreUnavailableError,
    WriteTx,
)
from notary.core.errors import NotaryBaseError
from notary.core.receipts import Receipt
from notary.core.server_names import SKELETON_VERSION, NameHold

__all__ = [
    "AllowanceConflict",
    "ApiKeyListing",
    "ApiKeyRecord",
    "IssuedReceipt",
    "NotaryStore",
    "NotaryWriteTx",
    "ReceiptKeyRecord",
    "ReceiptWithheldError",
    "Screening",
    "ServerNameRecord",
    "ServerNameTaken",
    "SkeletonsOutdated",
    "UsageKey",
    "check_skeletons",
    "new_claims",
    "notary_tx",
]

UsageKey = tuple[str, str]
"""(account name, UTC month ``YYYY-MM``): what an allowance is counted per."""


class ReceiptWithheldError(StoreError, NotaryBaseError):
    """The receipt exists but is not served: its signed form could not be recovered when the
    store was migrated (see ``notary migrate``). Serving a rebuilt guess would be a receipt
    that does not verify, or worse, one that was never signed."""

    def __init__(self, receipt_id: str, problem: str) -> None:
        super().__init__(f"receipt {receipt_id} is withheld: {problem}")
        self.receipt_id = receipt_id
        self.problem = problem


class AllowanceConflict(StoreError, NotaryBaseError):
    """A new key for an existing account came with another monthly allowance than the
    account's: the allowance is the account's, for all its keys, and changes only through
    :meth:`NotaryStore.set_monthly_allowance`."""

    def __init__(self, account: str, current: int | None) -> None:
        shown = "unlimited" if current is None else str(current)
        super().__init__(f"account {account!r} has a monthly allowance of {shown}")
        self.account = account
        self.current = current


class ServerNameTaken(StoreError, NotaryBaseError):
    """A server name, or one confusable with it, is another account's."""


@dataclass(frozen=True)
class ServerNameRecord:
    """A server name and the account that holds it (``since``: UNIX time it was claimed or
    granted; 0 for names assigned by the migration that introduced holding)."""

    name: str
    account: str
    since: float


@dataclass(frozen=True)
class ApiKeyRecord:
    """What authenticating one API key needs (the secret only as its SHA-256)."""

    key_id: str
    account: str
    secret_sha256: bytes
    revoked: float | None
    monthly_allowance: int | None


@dataclass(frozen=True)
class ApiKeyListing:
    """One line of ``notary apikey list``."""

    key_id: str
    account: str
    monthly_allowance: int | None
    used_this_month: int
    created: float
    revoked: float | None


@dataclass(frozen=True)
class ReceiptKeyRecord:
    """A receipt key the store knows: its kid and public JWK (JSON text); the seed is a file."""

    kid: str
    jwk: str
    created: float


@dataclass(frozen=True)
class IssuedReceipt:
    """A receipt signed inside the batch transaction, for the account that asked for it.

    ``receipt`` carries its signature and no proof; ``receipt.index`` is its entry's index and
    ``receipt.entry_url`` must end with that index in decimal (the notary writes
    ``<base>/v1/ledger/entries/<index>``), so a backend may keep only the prefix.
    """

    receipt: Receipt
    account: str


class SkeletonsOutdated(StoreUnavailableError, NotaryBaseError):
    """The store's server-name skeletons were recomputed, since this process opened it, by a
    process with other ICU or Unicode data: this one refuses to judge look-alikes by a table it
    did not compute (HTTP: 503, nothing written) until it is restarted, which recomputes them."""


def check_skeletons(stored: str | None) -> None:
    """:class:`SkeletonsOutdated` unless the stored skeletons' version is this process's."""
    if stored != SKELETON_VERSION:
        raise SkeletonsOutdated(
            f"the store's server-name skeletons were computed with {stored!r}, this process "
            f"computes {SKELETON_VERSION!r} (a process with other ICU or Unicode data opened "
            "the store since): restart this process, which recomputes them, and run every "
            "process of this store with the same ICU")


def new_claims(receipts: Iterable[tuple[Receipt, str]], held: dict[str, str]
               ) -> list[tuple[str, str]]:
    """The (server name, account) claims that a batch's receipts make: the first receipt
    under a name nobody holds. ``held`` maps names to their holders as the batch's screen found
    them, and takes the claims. A receipt under a name another account holds is a
    :class:`~ledger.storage.base.StoreError` (the screen refuses it; storing it would lose the
    holder's claim without a trace); a backend inserts each claim so that one held after all
    fails the transaction."""
    out = []
    for receipt, account in receipts:
        holder = held.get(receipt.server)
        if holder is None:
            held[receipt.server] = account
            out.append((receipt.server, account))
        elif holder != account:
            raise StoreError(f"a receipt of account {account!r} is under a server name another "
                             "account holds (the batch's screen was bypassed)")
    return out


@dataclass(frozen=True)
class Screening:
    """What :meth:`NotaryWriteTx.screen` found under the lock.

    ``logged`` maps each asked digest that is logged already to its receipt (None: logged, but
    its receipt is withheld); ``usage`` the stored writes of each asked (account, month);
    ``last_issued_at`` the latest ``issued_at`` stored (None before the first receipt): new
    receipts are issued no earlier, so ``issued_at`` never decreases along the log.
    ``keys_changed``: API keys or accounts changed since the store's key cache was loaded
    (a store that authenticates from a cache kept current asynchronously, PostgreSQL's, says
    so here, under the lock, so that a key revoked a moment ago issues nothing more).
    ``logged_by``: the account each digest of ``logged`` was logged under (a digest is one
    account's: another account is never answered with its receipt). ``servers``: who holds
    each asked server name and the names confusable with it. ``store_clock``: the database
    server's clock (an ``issued_at`` string) for a store whose frontends may run on other
    machines (PostgreSQL); None where every process shares this machine's clock.
    """

    logged: Mapping[str, Receipt | None] = field(default_factory=dict)
    usage: Mapping[UsageKey, int] = field(default_factory=dict)
    last_issued_at: str | None = None
    keys_changed: bool = False
    logged_by: Mapping[str, str] = field(default_factory=dict)
    servers: Mapping[str, NameHold] = field(default_factory=dict)
    store_clock: str | None = None


@runtime_checkable
class NotaryWriteTx(RollingTx, Protocol):
    """The log's write transaction plus the notary's reads and rows inside it."""

    async def screen(self, digests: Collection[str], usage: Collection[UsageKey],
                     servers: Collection[str] = ()) -> Screening:
        """Under the lock: the receipts already stored for ``digests`` and their accounts, the
        stored usage of each key in ``usage`` (0 when none), the latest ``issued_at`` stored,
        and who holds each name in ``servers`` and the names confusable with it (UTS #39
        skeleton, :func:`notary.core.server_names.name_skeleton`)."""
        ...

    async def add_receipts(self, receipts: Sequence[IssuedReceipt],
                           usage: Mapping[UsageKey, int]) -> None:
        """Store signed receipts and add ``usage`` (writes per account and month); committed
        with the transaction's tiles and checkpoint, or not at all. Every account named must
        exist (:class:`~ledger.storage.base.StoreError` otherwise). The latest ``issued_at``
        stored becomes the receipts' latest. A receipt's server name that nobody holds yet
        becomes its account's (the screen decided, under this lock, that it may); one under a
        name another account holds fails (:func:`new_claims`), never a claim silently lost."""
        ...


class NotaryStore(RollingStore, Protocol):
    """A log store that also holds the notary's tables (see the module's theory of operation).

    Every method may raise :class:`~ledger.storage.base.StoreError` when the store cannot be
    used; reads of one receipt may raise :class:`ReceiptWithheldError`.
    """

    def transaction(self) -> AbstractAsyncContextManager[NotaryWriteTx]: ...

    # Receipts -----------------------------------------------------------------------------

    async def receipt_by_id(self, receipt_id: str) -> Receipt | None:
        """The stored receipt (signed, no proof) with this id, or None."""
        ...

    async def receipt_by_digest(self, call_sha256: str) -> Receipt | None:
        """The stored receipt for this ``call_sha256`` (lower-case hex), or None."""
        ...

    async def search_receipts(self, *, server: str | None = None, tool: str | None = None,
                              since: str | None = None, until: str | None = None,
                              before: tuple[str, int] | None = None, limit: int = 20
                              ) -> list[Receipt]:
        """Receipts newest first by ``(issued_at, index)``, at most ``limit`` of them.

        ``server`` and ``tool`` must match exactly; ``since`` (inclusive) and ``until``
        (exclusive) are ``issued_at`` strings (fixed width, so text order is time order);
        ``before`` is the ``(issued_at, index)`` the page starts strictly after. Withheld
        receipts are left out. Every combination is an indexed range, never a scan.
        """
        ...

    # Reclaiming a pruned range (``notary log prune --reclaim``, docs/lifecycle.md) ----------

    async def first_receipt(self, lo: int, hi: int) -> int | None:
        """The lowest position in ``[lo, hi)`` that still has a receipt row."""
        ...

    async def reclaim_receipts(self, lo: int, hi: int,
                               keys: Sequence[tuple[int, str, str]]) -> int:
        """Delete, in one transaction, the receipt rows at positions ``[lo, hi)`` and their
        lookup rows (``keys``: position, receipt id, call_sha256 of each); how many receipt
        rows it deleted. Idempotent."""
        ...

    async def free_bytes(self) -> int | None:
        """Bytes the store holds free for new rows (SQLite's free pages), or None when the
        store does not say (PostgreSQL: VACUUM makes deleted rows' space reusable)."""
        ...

    # Accounts, API keys and usage -----------------------------------------------------------

    async def api_key(self, key_id: str) -> ApiKeyRecord | None: ...

    async def usage(self, account: str, month: str) -> int:
        """Committed writes of ``account`` in ``month`` (0 when none)."""
        ...

    async def create_api_key(self, account: str, monthly_allowance: int | None, key_id: str,
                             secret_sha256: bytes) -> None:
        """Add a key, creating the account if new (with ``monthly_allowance``; None:
        unlimited). For an existing account a given allowance must be the account's
        (:class:`AllowanceConflict` otherwise, and nothing is added): a new key never changes
        what the account's other keys may spend."""
        ...

    async def set_monthly_allowance(self, account: str, monthly_allowance: int | None
                                    ) -> bool:
        """Set an account's allowance (None: unlimited), for all its keys; False when there is
        no such account."""
        ...

    async def digest_account(self, call_sha256: str) -> str | None:
        """The account a logged digest was logged under (None: not logged). A digest is one
        account's: the service never answers another account with its receipt."""
        ...

    async def list_api_keys(self, month: str) -> list[ApiKeyListing]:
        """Every key, oldest first, with its account's usage in ``month``."""
        ...

    async def revoke_api_key(self, key_id: str) -> bool:
        """Revoke an active key; False when there is no such active key."""
        ...

    # Server names ---------------------------------------------------------------------------

    async def server_names(self, account: str | None = None) -> list[ServerNameRecord]:
        """The held server names (of ``account`` only, when given), by name."""
        ...

    async def grant_server_name(self, name: str, account: str) -> bool:
        """Give a free name to ``account`` under the log's write lock; False if it holds it
        already. :class:`ServerNameTaken` if the name, or one confusable with it, is another
        account's; StoreError if there is no such account."""
        ...

    async def move_server_name(self, name: str, account: str) -> str:
        """Give a held name to another account under the log's write lock; the account that
        held it. StoreError if the name is not held or there is no such account."""
        ...

    # Receipt keys ---------------------------------------------------------------------------

    async def receipt_keys(self) -> list[ReceiptKeyRecord]:
        """Every receipt key, oldest first: the newest signs, all are published."""
        ...

    async def add_receipt_key(self, kid: str, jwk: str, created: float) -> bool:
        """Register a receipt key's public half; False if the kid was known already."""
        ...


def notary_tx(tx: WriteTx) -> NotaryWriteTx:
    """The notary's view of the transaction the sequencer hands its hooks.

    The sequencer is generic (``ledger`` knows nothing of receipts), so it passes a
    :class:`~ledger.storage.base.WriteTx`; the notary opened the log on a :class:`NotaryStore`,
    whose transactions are :class:`NotaryWriteTx`. Checked, not assumed: a log opened on a
    plain log store fails here loudly instead of losing receipts.
    """
    if type(tx) in _NOTARY_TX_TYPES:  # checked once per class: a Protocol isinstance is slow
        return cast(NotaryWriteTx, tx)
    if not isinstance(tx, NotaryWriteTx):
        raise TypeError(f"the log's store is not a notary store (its transaction is "
                        f"{type(tx).__name__})")
    _NOTARY_TX_TYPES.add(type(tx))
    return tx


_NOTARY_TX_TYPES: set[type] = set()
"""Transaction classes found to be :class:`NotaryWriteTx` (their methods are the class's)."""
