"""The ``notary`` commands that banners and error messages suggest, complete: each names the
store it is about (``--data``, and ``--database`` unless the environment gives it), so it runs as
printed, from any directory."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

from notary.core.databases import is_postgres
from notary.serving.config import SETTINGS, Settings

__all__ = ["shown_database", "store_command"]

_DATABASE_ENV = next(row.env for row in SETTINGS if row.name == "database")


def shown_database(url: str) -> str:
    """A ``--database`` value as a message may print it: in full, unless it holds a password,
    which is never echoed (then ``postgresql://…``: the operator types their own)."""
    if not is_postgres(url):
        return url
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    if ":" in userinfo or "password" in parse_qs(parts.query):
        return "postgresql://…"
    return url


def store_command(settings: Settings, command: str, *args: str, program: str = "notary",
                  env: Mapping[str, str] | None = None) -> str:
    """``PROGRAM COMMAND --data DIR [--database URL] ARGS``, quoted for a POSIX shell, for the
    store ``settings`` select. ``--database`` is left out when it is the default (the SQLite
    file in DIR) or ``NOTARY_DATABASE`` holds it, as it will for the command too."""
    env = os.environ if env is None else env
    words = [*command.split(), "--data", os.path.abspath(settings.data)]
    database = settings.database
    if database and env.get(_DATABASE_ENV) != database:
        words += ["--database", shown_database(database)]
    return " ".join([program, shlex.join([*words, *args])])
