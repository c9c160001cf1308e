"""``HOST:PORT`` as the commands take it, parsed one way everywhere."""

from __future__ import annotations

from ledger.process.exitcodes import UsageError

__all__ = ["AddressError", "parse_host_port"]


class AddressError(UsageError, ValueError):
    """AddressError is a ``HOST:PORT`` that cannot be used.

    It is a UsageError so that a command reports it as its one ``error:`` line with no wrapper
    of its own, and a ValueError for library callers that treat it as bad input.
    """


def parse_host_port(text: str, *, what: str = "the address",
                    default_host: str | None = None) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` (an IPv6 host in brackets); AddressError when malformed.

    ``what`` names the value in the message (a flag such as ``--listen``), so the user knows
    which one to fix. Port 0 is allowed (let the system choose). An empty host is refused
    unless ``default_host`` is given.
    """
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise AddressError(f"{what} must be HOST:PORT, got {text!r}")
    if not host:
        if default_host is None:
            raise AddressError(f"{what} must be HOST:PORT with a host, got {text!r}")
        host = default_host
    return host, int(port)
