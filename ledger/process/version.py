"""The installed version of the distribution both packages ship in (``mcp-notary``), for
``--version`` and the MCP server's serverInfo."""

from __future__ import annotations

import importlib.metadata

__all__ = ["DISTRIBUTION", "package_version"]

DISTRIBUTION = "mcp-notary"


def package_version() -> str:
    """The installed ``mcp-notary`` version (``0+unknown`` when run from a tree that was never
    installed)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
