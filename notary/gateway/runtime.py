"""The gateway's state for the lifetime of its server: configuration, the committed policy,
the upstream connections, the notary client and the state file.

One :class:`GatewayRuntime` is the lifespan context of the MCP server
(:mod:`notary.gateway.server`); the request paths read it: :mod:`.toolcalls` for
``tools/call``, :mod:`.handlers` for every other method, both through :mod:`.authorization`
(the policy's decision, notarized) and :mod:`.forwarding` (the upstream).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import structlog
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from notary.core.ids import now_issued_at
from notary.gateway import codes, forwarding
from notary.gateway.forwarding import Inbound
from notary.gateway.hostpaths import symlinked_rule_paths
from notary.gateway.policy import Policy, PolicyError, load_policy_text
from notary.gateway.projection import OutputSchemas
from notary.gateway.replies import string_meta
from notary.gateway.salt import read_salt
from notary.gateway.store import GatewayStore
from notary.gateway.upstreams import Link, Upstreams
from notary.sdk import Notarizer, NotaryClient, NotaryError, NotaryResponseError

UpstreamTarget = str | StdioServerParameters | Server[Any] | MCPServer[Any]
"""A streamable HTTP URL, a stdio command, or an in-process server (tests, benchmarks)."""

_log = structlog.get_logger("notary.gateway")


@dataclass
class GatewayConfig:
    """Everything a gateway needs; the CLI builds one from its flags.

    ``name`` (default: the policy's ``gateway.name``, else ``notary-gateway``) is the MCP
    server name and the ``server`` of every ledger entry the gateway makes. ``agent`` fixes the
    ``agent`` fact (else the policy's ``gateway.agent``, else the request's
    ``_meta["io.zkmcp/agent"]``, a claim the gateway cannot authenticate).
    ``list_all_tools`` makes ``tools/list`` forward every upstream tool; by default it lists
    only the tools the policy could allow (:meth:`Policy.could_allow`), so a client is not
    offered tools every call of which is denied. ``resolve_paths`` resolves ``path`` facts
    through symlinks on this host before the rules apply (:mod:`notary.gateway.hostpaths`);
    None means: when the upstream runs on this host (a command, or in process), not for a URL.
    """

    upstream: UpstreamTarget
    policy_path: Path
    salt_path: Path
    state_path: Path
    notary_url: str
    api_key: str
    name: str | None = None
    agent: str | None = None
    upstream_mode: str = "auto"
    notary_public_url: str | None = None
    notary_timeout: float = 5.0
    upstream_timeout: float | None = 120.0
    list_all_tools: bool = False
    resolve_paths: bool | None = None


@dataclass(frozen=True)
class PolicyState:
    """The policy in force, its commitment, and the file stamp it was read at."""

    policy: Policy
    commitment: str
    stamp: tuple[int, int, int]
    receipt: dict[str, object] | None


def _file_stamp(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size, st.st_ino


class GatewayRuntime:
    """The gateway's state for the lifetime of its server (the lifespan context)."""

    def __init__(self, config: GatewayConfig, name: str, store: GatewayStore,
                 notary: NotaryClient) -> None:
        self.config = config
        self.name = name
        self.store = store
        self.notary = notary
        self.notarizer = Notarizer(notary, name, embed_receipt=True, on_unavailable="mark",
                                   public_url=config.notary_public_url)
        self.schemas = OutputSchemas()
        self.salt = read_salt(config.salt_path)
        self.resolve_paths = (config.resolve_paths if config.resolve_paths is not None
                              else not isinstance(config.upstream, str))
        self._policy: PolicyState | None = None
        self._bad_stamp: tuple[int, int, int] | None = None
        self._reload_lock = asyncio.Lock()
        self._upstream: Client | None = None
        self.upstreams: Upstreams | None = None
        self._key_locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self.upstream_name = "upstream"
        self.upstream_version = "unknown"

    # Policy -----------------------------------------------------------------------------

    @property
    def policy(self) -> PolicyState:
        if self._policy is None:
            raise RuntimeError("no policy loaded")
        return self._policy

    async def load_policy(self) -> PolicyState:
        """Read, commit (notarize ``policy.commit``) and install the policy file.

        Raises :class:`PolicyError` for a malformed file (or, when path facts are resolved on
        this host, a path prefix written through a symlink) and :class:`NotaryError` when the
        commitment cannot be notarized: a policy the ledger has not taken is never used.
        """
        path = self.config.policy_path
        stamp = _file_stamp(path)
        policy = load_policy_text(path.read_text("utf-8"))
        if self.resolve_paths:
            symlinked = symlinked_rule_paths(policy)
            if symlinked:
                raise PolicyError("", "; ".join(symlinked))
        commitment = policy.commitment(self.salt)
        receipt = await self.notary.notarize(self.name, codes.POLICY_COMMIT_TOOL, commitment)
        if receipt.call_sha256 != commitment or receipt.server != self.name \
                or receipt.tool != codes.POLICY_COMMIT_TOOL:
            raise NotaryResponseError("the notary answered a receipt for another entry than "
                                      "the policy commitment")
        evidence = receipt.to_json()  # kept as the notary signed it, with its proof
        await self.store.save_policy(commitment, now_issued_at(), evidence)
        state = PolicyState(policy, commitment, stamp, evidence)
        self._policy = state
        await _log.ainfo("policy_committed", policy=str(path), commitment=commitment,
                         receipt=receipt.id, tools=sorted(policy.tools))
        return state

    async def current_policy(self) -> PolicyState:
        """The policy in force, reloading it first when the file changed (mtime/size/inode).

        Reloading on change rather than on SIGHUP works the same under every transport, in
        process and on every platform, and costs one ``stat`` per call. A new file that does
        not parse leaves the previous (committed) policy in force until the file changes
        again; one whose commitment the notary does not take (yet) is retried on the next
        call, the previous policy staying in force meanwhile.
        """
        state = self.policy
        try:
            stamp = _file_stamp(self.config.policy_path)
        except OSError as e:
            await _log.aerror("policy_unreadable", error=str(e), keeping=state.commitment)
            return state
        if stamp == state.stamp or stamp == self._bad_stamp:
            return state
        async with self._reload_lock:
            if self.policy.stamp != stamp and stamp != self._bad_stamp:
                try:
                    await self.load_policy()
                except (OSError, PolicyError, UnicodeDecodeError) as e:
                    # Not retried until the file changes again (no error per call).
                    self._bad_stamp = stamp
                    await _log.aerror("policy_reload_failed", error=str(e),
                                      keeping=self.policy.commitment)
                except NotaryError as e:  # retried on the next call
                    await _log.aerror("policy_commit_failed", error=str(e),
                                      keeping=self.policy.commitment)
        return self.policy

    # Upstream ---------------------------------------------------------------------------

    def attach_upstream(self, client: Client) -> None:
        self._upstream = client
        if self.upstreams is not None:
            self.upstreams.attach_shared(client)
        info = client.server_info
        if info is not None:
            self.upstream_name = info.name or self.upstream_name
            self.upstream_version = info.version or self.upstream_version

    @property
    def upstream(self) -> Client:
        if self._upstream is None:
            raise RuntimeError("the upstream is not connected")
        return self._upstream

    @property
    def upstream_capabilities(self) -> types.ServerCapabilities | None:
        return self._upstream.server_capabilities if self._upstream is not None else None

    async def link_for(self, inbound: Inbound | None) -> Link:
        """The upstream link serving ``inbound`` (the client's own session for a 2025-era
        client; the shared connection otherwise, or without an inbound request)."""
        if inbound is not None and self.upstreams is not None:
            link = await self.upstreams.for_request(inbound.session, inbound.protocol_version)
            if link.client is not None:
                return link
        if self.upstreams is not None and self.upstreams.shared.client is not None:
            return self.upstreams.shared
        shared = Link(relay=False)
        shared.client = self.upstream
        return shared

    async def send_upstream(self, inbound: Inbound | None, method: str,
                            params: Mapping[str, object] | None,
                            meta: Mapping[str, object] | None = None
                            ) -> tuple[dict[str, object], bool]:
        """Send one request upstream on the link serving ``inbound``: (raw result, degraded);
        see :func:`notary.gateway.forwarding.send`."""
        return await forwarding.send(await self.link_for(inbound), inbound, method, params,
                                     meta, self.config.upstream_timeout)

    @property
    def upstream_listens(self) -> bool:
        """Whether the shared upstream speaks 2026-07-28 (and so serves a listen stream)."""
        return (self._upstream is not None
                and self._upstream.protocol_version in MODERN_PROTOCOL_VERSIONS)

    def record_tools(self, tools: list[types.Tool]) -> None:
        """Learn the tools' input and output schemas (for projection and header checks)."""
        for tool in tools:
            self.schemas.record(tool.name, tool.input_schema, tool.output_schema)

    async def refresh_tools(self) -> None:
        """List every upstream tool (all pages) to learn their input and output schemas."""
        cursor: str | None = None
        for _ in range(100):
            page = await self.upstream.list_tools(cursor=cursor, cache_mode="refresh")
            self.record_tools(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return

    def agent_for(self, meta: Mapping[str, object] | None, policy: Policy) -> str | None:
        """The ``agent`` fact: configured (flag, then policy) or else claimed in ``_meta``."""
        configured = self.config.agent or policy.agent
        if configured is not None:
            return configured
        return string_meta(meta, codes.AGENT_META_KEY)

    @asynccontextmanager
    async def key_lock(self, key: str) -> AsyncIterator[None]:
        """Serialize calls sharing an idempotency key inside this process."""
        lock, users = self._key_locks.get(key, (asyncio.Lock(), 0))
        self._key_locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._key_locks[key]
            if users <= 1:
                del self._key_locks[key]
            else:
                self._key_locks[key] = (lock, users - 1)
