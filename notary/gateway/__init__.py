"""The authorization gateway (``notary gateway``): policy-checked, receipted MCP proxying.

See :mod:`notary.gateway.server` for the server and where each request goes (the runtime,
forwarding, ``tools/call`` and the other handlers each have a module),
:mod:`notary.gateway.policy` for the policy format, :mod:`notary.gateway.codes` for the
public codes and ``_meta`` keys, :mod:`notary.gateway.audit` for re-checking past decisions
and :mod:`notary.gateway.agent` for the agent-side recorder (AER-1 ``LOGGED BY AGENT``).

Importing the package is cheap; the server, with the ``mcp``
SDK behind it, is imported on first use of :class:`GatewayConfig` or :func:`build_gateway`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from notary.gateway.server import GatewayConfig, GatewayRuntime, build_gateway

__all__ = ["GatewayConfig", "GatewayRuntime", "build_gateway"]


def __getattr__(name: str) -> object:
    if name in ("GatewayConfig", "GatewayRuntime", "build_gateway"):
        from notary.gateway import server  # deferred: the mcp SDK loads only when used

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
