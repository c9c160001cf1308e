"""Administration on any notary store: accounts, API keys, server names and receipt keys.

``notary apikey …``, ``notary account …``, ``notary names …`` and ``notary keys rotate`` are
thin wrappers over these; anything that holds
a store in process (a memory store has no other way in, tests, an embedding application) calls
them directly, so both paths check the same things.
"""

from __future__ import annotations

from notary.core.accounts import ACCOUNT_RE, NewApiKey, new_api_key
from notary.core.errors import NotaryBaseError
from notary.core.receipts import ReceiptKey
from notary.core.records import MAX_NAME_CHARS
from notary.core.server_names import display_name, is_valid_name, server_name_problem
from notary.serving.keys import Paths, create_receipt_key
from notary.store.base import AllowanceConflict, NotaryStore, ServerNameTaken

__all__ = ["AdminError", "create_api_key", "grant_server_name", "move_server_name",
           "revoke_api_key", "rotate_receipt_key", "set_monthly_allowance"]


class AdminError(NotaryBaseError, ValueError):
    """An administrative request that cannot be done as asked (the message says why).

    ``then``: the ``notary`` command that does what was meant (its words and arguments, without
    the store's flags, which only the command line knows), or empty."""

    def __init__(self, message: str, *, then: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.then = then


async def create_api_key(store: NotaryStore, account: str, monthly_allowance: int | None = None
                         ) -> NewApiKey:
    """A new API key for ``account`` (created if new); its token is shown once, never stored.

    ``monthly_allowance`` (writes per UTC month) is a new account's (None: unlimited). The
    allowance is the account's, shared by all its keys: for an existing account a different
    one is refused (:func:`set_monthly_allowance` changes it), so adding a key never changes
    what the others may spend.
    """
    _check_account(account)
    _check_allowance(monthly_allowance)
    key = new_api_key()
    try:
        await store.create_api_key(account, monthly_allowance, key.key_id, key.secret_sha256)
    except AllowanceConflict as e:
        raise AdminError(f"{e}, shared by all its keys; a new key does not change it: leave "
                         "out --monthly-allowance, or change it for every key",
                         then=("account set-allowance", account,
                               str(monthly_allowance))) from None
    return key


def _check_account(account: str) -> None:
    if not ACCOUNT_RE.fullmatch(account):
        raise AdminError("account names are 1-64 characters: letters, digits and ._@- "
                         "(starting with a letter or digit)")


def _check_allowance(monthly_allowance: int | None) -> None:
    if monthly_allowance is not None and monthly_allowance < 0:
        raise AdminError("the monthly allowance must be zero or more")


async def set_monthly_allowance(store: NotaryStore, account: str, monthly_allowance: int | None
                                ) -> None:
    """Set an account's allowance (writes per UTC month; None: unlimited) for all its keys;
    it takes effect at once in every process."""
    _check_allowance(monthly_allowance)
    if not await store.set_monthly_allowance(account, monthly_allowance):
        raise AdminError(f"no account {account!r}; an account is created with its first API key",
                         then=("apikey create", "--account", account))


def _check_server_name(name: str) -> None:
    if not is_valid_name(name):
        raise AdminError(f"a server name is 1-{MAX_NAME_CHARS} printable characters")


async def grant_server_name(store: NotaryStore, name: str, account: str) -> bool:
    """Give ``account`` a server name nobody holds (False: it holds it already). Refused when
    the name, or one confusable with it, is another account's: :func:`move_server_name`; and,
    as for a request's claim, when it does not read as what it is (blanks, mixed scripts)."""
    problem = server_name_problem(name)
    if problem is not None:
        raise AdminError(f"server name {display_name(name)} {problem}")
    try:
        return await store.grant_server_name(name, account)
    except ServerNameTaken as e:
        raise AdminError(f"{e}; to give it to {account!r}, move it",
                         then=("names move", name, "--to", account)) from None


async def move_server_name(store: NotaryStore, name: str, account: str) -> str:
    """Give a held server name to ``account``; the account that held it."""
    _check_server_name(name)
    return await store.move_server_name(name, account)


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
