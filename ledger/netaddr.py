"""``HOST:PORT`` as the commands take it, parsed one way everywhere."""

from __future__ import annotations


def parse_host_port(text: str, *, default_host: str | None = None) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` (an IPv6 host in brackets); ValueError when malformed.

    Port 0 is allowed (let the system choose). An empty host is refused unless
    ``default_host`` is given.
    """
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT")
    if not host:
        if default_host is None:
            raise ValueError(f"{text!r} has no host")
        host = default_host
    return host, int(port)
