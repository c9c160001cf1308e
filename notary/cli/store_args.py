"""The flags every ``notary`` command that touches the store takes, and opening that store.

``--data`` and ``--database`` are rows of the settings table (``notary.serving.config``), added
here by :func:`add_setting_flag` just as ``notary serve`` adds all of its flags, so a command
that only administers the store spells and explains them exactly as ``serve`` does; ``--config``
names the TOML file they (and every other setting) may also come from.

Every store command imports this module to build its flags, for ``--help`` too: what opens a
store is imported only by the functions that open one.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ledger.process.exitcodes import UsageError
from notary.core.databases import MEMORY, is_memory, is_postgres
from notary.serving.commands import store_command
from notary.serving.config import SETTINGS, Setting, Settings, resolve

if TYPE_CHECKING:
    from notary.operator.admin import AdminError
    from notary.serving.keys import Paths
    from notary.store.base import NotaryStore

__all__ = ["add_setting_flag", "add_store_flags", "refused", "settings", "with_store"]

_T = TypeVar("_T")
_BY_NAME = {row.name: row for row in SETTINGS}
_TYPES: dict[str, Callable[[str], object]] = {"Path": Path, "int": int, "float": float}
"""What argparse turns a flag's text into, by the setting's kind (else it stays text)."""


def add_setting_flag(parser: argparse.ArgumentParser, row: Setting) -> None:
    """The flag of one setting, stored under the setting's name for :func:`settings`.

    It has no default of its own (argparse's None means "not given"), so the environment, the
    TOML file and the table's default still apply after it; the help shows the table's.
    """
    if row.flag is None:
        return
    text = row.help + (f" (default: {row.default_text})" if row.default_text else "")
    parser.add_argument(row.flag, dest=row.name, metavar=row.metavar,
                        choices=row.choices or None,
                        type=_TYPES.get(row.kind, str),
                        action="append" if row.repeatable else "store",
                        help=text.replace("%", "%%"))


def add_store_flags(parser: argparse.ArgumentParser) -> None:
    """``--data``, ``--database`` and ``--config``: where the store is."""
    for name in ("data", "database"):
        add_setting_flag(parser, _BY_NAME[name])
    parser.add_argument("--config", type=Path, metavar="FILE",
                        help="TOML settings file (default: $NOTARY_CONFIG, if set)")


def settings(args: argparse.Namespace) -> Settings:
    """The settings from the flags a command was given, the environment and the TOML file."""
    flags = {k: v for k, v in vars(args).items() if k in _BY_NAME}
    return resolve(flags, config_file=getattr(args, "config", None))


def refused(args: argparse.Namespace, e: AdminError) -> UsageError:
    """The usage error for an administrative refusal, ending with the command it suggests,
    completed with this command's store so that it runs as printed."""
    if not e.then:
        return UsageError(str(e))
    command, *rest = e.then
    return UsageError(f"{e}: `{store_command(settings(args), command, *rest)}`")


def _log_origin(paths: Paths) -> str | None:
    """The log's origin, from its verifier key file (``<origin>+<key id>+<key>``)."""
    try:
        return paths.log_vkey.read_text().strip().split("+", 1)[0] or None
    except OSError:
        return None


def with_store(args: argparse.Namespace, use: Callable[[NotaryStore], Awaitable[_T]], *,
               bases: tuple[str, ...] = ()) -> _T:
    """Run ``use`` on the store the settings select, beside a running server if there is one.

    Opening migrates a store of an older layout, as ``notary serve`` would (``bases``: more
    base URLs older receipts may have been signed with, tried first).
    """
    # deferred: the store backends, the event loop and the key files, only to open a store
    from ledger.process import event_loop
    from ledger.storage.base import StoreError
    from notary.serving.keys import Paths
    from notary.serving.startup import entry_url_bases
    from notary.store import open_store

    chosen = settings(args)
    if is_memory(chosen.database):
        raise UsageError(f"database {MEMORY!r} lives inside one `notary serve` process; there "
                         "is nothing to administer from the command line")
    paths = Paths(chosen.data)
    pg = is_postgres(chosen.database)
    if not pg and not paths.db.exists():
        if paths.log_key.exists():  # a frontend's keys: its store is elsewhere
            raise UsageError(f"no notary database at {paths.db}, but {chosen.data} holds a log "
                             "key: a frontend of a PostgreSQL store needs --database URL "
                             "(or NOTARY_DATABASE)")
        raise UsageError(f"no notary database at {paths.db}; run "
                         f"`{store_command(chosen, 'serve')}` once first")
    where = "the PostgreSQL store" if pg else f"the store at {paths.db}"  # never the URL
    origin = _log_origin(paths)
    candidates = [*bases, *(entry_url_bases(chosen, origin) if origin else [chosen.base_url])]

    async def run() -> _T:
        store = await open_store(chosen.database, paths.db, entry_url_bases=candidates)
        try:
            return await use(store)
        finally:
            await store.close()

    try:
        return event_loop.run(run())
    except StoreError as e:
        raise UsageError(f"{where}: {e}") from e
