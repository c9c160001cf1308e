"""Administration on any notary store: API keys and receipt keys.

``notary apikey …`` and ``notary keys rotate`` are thin wrappers over these; anything that holds
a store in process (a memory store has no other way in, tests, an embedding application) calls
them directly, so both paths check the same things.
"""

from __future__ import annotations

from notary.core.accounts import ACCOUNT_RE, NewApiKey, new_api_key
from notary.core.errors import NotaryBaseError
from notary.core.receipts import ReceiptKey
from notary.keys import Paths, create_receipt_key
from notary.store.base import NotaryStore

__all__ = ["AdminError", "create_api_key", "revoke_api_key", "rotate_receipt_key"]


class AdminError(NotaryBaseError, ValueError):
    """An administrative request that cannot be done as asked (the message says why)."""


async def create_api_key(store: NotaryStore, account: str, monthly_allowance: int | None = None
                         ) -> NewApiKey:
    """A new API key for ``account`` (created if new); its token is shown once, never stored.

    ``monthly_allowance`` (writes per UTC month) replaces the account's when given; None keeps
    it, or makes a new account unlimited.
    """
    if not ACCOUNT_RE.fullmatch(account):
        raise AdminError("account names are 1-64 characters: letters, digits and ._@- "
                         "(starting with a letter or digit)")
    if monthly_allowance is not None and monthly_allowance < 0:
        raise AdminError("the monthly allowance must be zero or more")
    key = new_api_key()
    await store.create_api_key(account, monthly_allowance, key.key_id, key.secret_sha256)
    return key


def api_key_id(key_or_id: str) -> str:
    """The key id of an API key token (``nk_<id>_<secret>``) or of a bare id."""
    return key_or_id.removeprefix("nk_").split("_")[0]


async def revoke_api_key(store: NotaryStore, key_or_id: str) -> str:
    """Revoke a key (given as its id or as the key itself); its id. Takes effect at once."""
    key_id = api_key_id(key_or_id)
    if not await store.revoke_api_key(key_id):
        raise AdminError(f"no active API key {key_id!r}")
    return key_id


async def rotate_receipt_key(paths: Paths, store: NotaryStore) -> ReceiptKey:
    """A new receipt key signs from now on (within seconds, in every process); old ones stay
    published so their receipts keep verifying."""
    return await create_receipt_key(paths, store)
