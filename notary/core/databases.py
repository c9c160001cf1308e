"""What the ``database`` setting may say, and which backend it selects: plain text rules, kept
apart from the backends (:mod:`notary.store`) so that the settings table and the flags built
from it (``notary serve --help``) do not import them."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["MEMORY", "database_problem", "is_memory", "is_postgres", "store_kind"]

MEMORY = "memory:"


def is_memory(database: str) -> bool:
    return database == MEMORY


def is_postgres(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://"))


def store_kind(database: str) -> str:
    """The backend's name for logs and messages: never the URL, which may hold a password."""
    return "postgresql" if is_postgres(database) else "memory" if is_memory(database) else "sqlite"


def _host_port_ok(text: str) -> bool:
    """``host``, ``host:port`` or ``[v6]:port`` of a (multi-host) libpq URL; an empty host is
    libpq's default (the local socket)."""
    host, sep, port = text.rpartition(":") if not text.endswith("]") else (text, "", "")
    if not sep:
        host, port = text, ""
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        return False
    return "/" not in host and " " not in host


def database_problem(database: str) -> str | None:
    """What is wrong with a ``database`` setting no backend understands, as a predicate of the
    word "database" (``"'x' is not supported: …"``), or None when a backend takes it.

    A PostgreSQL URL is never echoed: it may hold a password."""
    if is_postgres(database):
        parts = urlsplit(database)
        hosts = parts.netloc.rpartition("@")[2]
        if not all(_host_port_ok(h) for h in hosts.split(",")):
            return ("URL is malformed (expected postgresql://[user[:password]@]host[:port]"
                    "[,host2[:port]…]/dbname[?target_session_attrs=read-write])")
        if not parts.path.strip("/"):
            return "URL names no database (postgresql://host/dbname)"
        return None
    if database not in ("", MEMORY):
        return (f"{database!r} is not supported: leave it empty for the SQLite file in the data "
                f"directory, use {MEMORY!r}, or a postgresql://host/dbname URL")
    return None
