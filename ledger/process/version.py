"""The version of the distribution both packages ship in (``mcp-notary``), for ``--version``
and the MCP server's serverInfo.

A constant, not ``importlib.metadata``: importing that and scanning the installed distributions
costs more than the rest of ``notary --version`` (benchmarks/docs/cli_start.md). It must equal
``version`` in pyproject.toml, which ``tests/notary/cli/test_notary_cli.py`` and the packaging
test (the built wheel's metadata) check.
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "__version__", "package_version"]

DISTRIBUTION = "mcp-notary"
__version__ = "0.1.0"


def package_version() -> str:
    """The ``mcp-notary`` version this code is."""
    return __version__
