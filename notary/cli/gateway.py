"""``notary gateway``: run the gateway, explain a policy, commit it, audit past decisions.

::

    notary gateway --upstream CMD|URL --policy FILE --notary URL [--http HOST:PORT] ...
    notary gateway explain --policy FILE [--upstream CMD|URL] [--json]
    notary gateway commit-policy --policy FILE [--salt-file F]
    notary gateway audit --policy FILE [--policy FILE...] [--salt-file F] --decisions FILE
                         [--jwks FILE|URL --log-key VKEY | --notary URL] [--server NAME] [--json]
    notary gateway decisions --state FILE       (the decision evidence as JSON lines)

The API key for the notary comes from ``--api-key-file`` or the ``NOTARY_API_KEY``
environment variable, never from a flag (flags show up in ``ps``). The salt file defaults to
``<state>.salt`` beside the state file (``gateway-state.salt``), never beside the policy (which
often lives in a repository), and is created (mode 0600) when absent; a ``<policy>.salt`` left
by an earlier version is still used when there is none beside the state.

Building the parser imports none of the gateway, the verifier, the event loop or the mcp SDK:
each function that runs a command imports what it uses, so ``notary gateway --help`` is quick.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ledger.process.exitcodes import ExitCode, UsageError
from ledger.process.netaddr import parse_host_port
from notary.cli.trust_args import witness_policy_from_args
from notary.core.paths import receipt_path

if TYPE_CHECKING:  # the mcp SDK costs most of a second to import: only when needed
    from mcp.client.stdio import StdioServerParameters

    from ledger.core.tlog_policy import TlogPolicy
    from notary.gateway.audit import AuditReport
    from notary.gateway.policy import Policy
    from notary.gateway.server import GatewayStartError
    from notary.gateway.store import DecisionEvidence

__all__ = ["parse_upstream", "register"]

DEFAULT_STATE = Path("gateway-state.db")


def _error(message: str) -> Exception:

    return UsageError(message)


def parse_upstream(text: str, env: Sequence[str] = (), cwd: str | None = None
                   ) -> str | StdioServerParameters:
    """An http(s) URL (streamable HTTP), else a command line run over stdio.

    ``env`` entries are ``KEY=VALUE``, merged over the SDK's minimal inherited environment
    (the SDK does not pass the gateway's whole environment to the upstream, on purpose).
    """
    if text.startswith(("http://", "https://")):
        if env or cwd:
            raise _error("--upstream-env and --upstream-cwd only apply to a command upstream")
        return text
    argv = shlex.split(text)
    if not argv:
        raise _error("--upstream is empty")
    extra: dict[str, str] = {}
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise _error(f"--upstream-env {item!r} is not KEY=VALUE")
        extra[key] = value
    from mcp.client.stdio import StdioServerParameters  # deferred: the mcp SDK is heavy

    return StdioServerParameters(command=argv[0], args=argv[1:], env=extra or None, cwd=cwd)


def _load_policy(path: Path) -> Policy:
    # deferred: the policy code (RE2, JCS), not for `--help`
    from notary.gateway.policy import PolicyError, load_policy_text

    try:
        return load_policy_text(path.read_text("utf-8"))
    except OSError as e:
        raise _error(f"cannot read the policy {path}: {e}") from e
    except PolicyError as e:
        raise _error(f"the policy {path} is not valid: {e}") from e


def _salt_path(args: argparse.Namespace) -> Path:
    """``--salt-file``, else beside the state file (or an earlier version's beside the policy)."""
    # deferred: the salt code, not for `--help`
    from notary.gateway.salt import default_salt_path, legacy_salt_path

    if args.salt_file is not None:
        return Path(args.salt_file)
    path = default_salt_path(args.state)
    legacy = legacy_salt_path(args.policy)
    if not path.exists() and legacy.exists():
        print(f"notary gateway: using the salt {legacy} (beside the policy, where earlier "
              f"versions kept it); move it to {path} or pass --salt-file", file=sys.stderr)
        return legacy
    return path


# run -----------------------------------------------------------------------------------------


def _api_key(args: argparse.Namespace) -> str:
    if args.api_key_file is not None:
        try:
            key = Path(args.api_key_file).read_text().strip()
        except OSError as e:
            raise _error(f"cannot read --api-key-file: {e}") from e
    else:
        key = os.environ.get("NOTARY_API_KEY", "").strip()
    if not key:
        raise _error("the gateway needs a notary API key: --api-key-file FILE or NOTARY_API_KEY")
    return key


def cmd_run(args: argparse.Namespace) -> int:
    # deferred: imports mcp; the event loop, uvicorn and the logging stack too
    from ledger.process import event_loop
    from ledger.process.structured_logs import configure
    from notary.cli.asgi import serve_asgi
    from notary.gateway.salt import SaltError, ensure_salt
    from notary.gateway.server import GatewayConfig, build_gateway

    if not args.upstream or not args.policy:
        raise _error("usage: notary gateway --upstream CMD|URL --policy FILE --notary URL "
                     "(or a subcommand: explain, commit-policy, audit, decisions)")
    notary_url = args.notary or os.environ.get("NOTARY_URL")
    if not notary_url:
        raise _error("the gateway needs a notary: --notary URL (or NOTARY_URL)")
    configure(args.log_format, "info")
    _load_policy(args.policy)
    salt_path = _salt_path(args)
    try:
        _, created = ensure_salt(salt_path)
    except (OSError, SaltError) as e:
        raise _error(str(e)) from e
    if created:
        print(f"notary gateway: created the policy salt {salt_path} (0600); keep it secret "
              "until you reveal the policy", file=sys.stderr)
    config = GatewayConfig(
        upstream=parse_upstream(args.upstream, args.upstream_env, args.upstream_cwd),
        policy_path=args.policy, salt_path=salt_path, state_path=args.state,
        notary_url=notary_url, api_key=_api_key(args), name=args.name, agent=args.agent,
        upstream_mode=args.upstream_mode, notary_public_url=args.notary_public_url,
        upstream_timeout=args.upstream_timeout, list_all_tools=args.list_all_tools,
        resolve_paths=args.resolve_paths)
    address = parse_host_port(args.http, what="--http") if args.http else None
    server = build_gateway(config)
    try:
        # The notary, the upstream and the policy commitment, before any transport serves.
        if address is not None:
            host, port = address
            serve_asgi(server.streamable_http_app(host=host), host, int(port),
                       f"notary gateway: serving MCP at http://{args.http}/mcp",
                       startup=server.started)
            return 0

        from notary.gateway.stdio import guarded_stdio  # deferred: the mcp SDK is heavy

        async def serve() -> None:
            # Not the SDK's stdio_server: it answers nothing to a batch or a deeply nested
            # line.
            async with server.started(), guarded_stdio() as (read_stream, write_stream):
                await server.run(read_stream, write_stream,
                                 server.create_initialization_options())

        event_loop.run(serve())
    except Exception as e:
        failure = _start_failure(e)
        if failure is None:
            raise
        if failure.usage:
            raise _error(str(failure)) from None
        print(f"notary gateway: error: {failure}", file=sys.stderr)
        return ExitCode.UNREACHABLE
    return 0


def _start_failure(error: BaseException) -> GatewayStartError | None:
    """The :class:`GatewayStartError` in ``error`` (itself, or inside exception groups)."""
    from notary.gateway.server import GatewayStartError  # deferred: imports mcp

    if isinstance(error, GatewayStartError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _start_failure(inner)
            if found is not None:
                return found
    return None


# explain / commit-policy -----------------------------------------------------------------------


async def _input_schemas(upstream: str | StdioServerParameters, mode: str
                         ) -> dict[str, dict[str, object] | None]:
    out: dict[str, dict[str, object] | None] = {}
    from mcp import Client  # deferred: the mcp SDK is heavy

    async with Client(upstream, mode=mode) as client:
        cursor: str | None = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                out[tool.name] = dict(tool.input_schema) if tool.input_schema else None
            cursor = page.next_cursor
            if cursor is None:
                break
    return out


def cmd_explain(args: argparse.Namespace) -> int:
    # deferred: the policy code and the event loop, not for `--help`
    from ledger.process import event_loop
    from notary.gateway.policy import explain, render_explanation

    policy = _load_policy(args.policy)
    schemas = None
    if args.upstream:
        target = parse_upstream(args.upstream, args.upstream_env, args.upstream_cwd)
        try:
            schemas = event_loop.run(_input_schemas(target, args.upstream_mode))
        except Exception as e:
            raise _error(f"cannot list the upstream's tools: {type(e).__name__}: {e}") from e
    items = explain(policy, schemas)
    if args.json:
        print(json.dumps([i.to_json() for i in items], indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_explanation(items, with_upstream=schemas is not None))
    return 0


def cmd_commit_policy(args: argparse.Namespace) -> int:
    # deferred: the salt code, not for `--help`
    from notary.gateway.salt import SaltError, ensure_salt

    policy = _load_policy(args.policy)
    salt_path = _salt_path(args)
    try:
        salt, created = ensure_salt(salt_path)
    except (OSError, SaltError) as e:
        raise _error(str(e)) from e
    if created:
        print(f"created the salt file {salt_path} (0600)", file=sys.stderr)
    print(policy.commitment(salt))
    return 0


# audit / decisions ---------------------------------------------------------------------------


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


async def _read_evidence(path: Path) -> tuple[list[DecisionEvidence],
                                              dict[str, dict[str, object] | None]]:
    # deferred: the gateway's store (aiosqlite) and the audit, not for `--help`
    from notary.gateway.audit import parse_jsonl
    from notary.gateway.store import read_decisions, read_policy_receipts

    if _is_sqlite(path):
        decisions = [e async for e in read_decisions(path)]
        return decisions, await read_policy_receipts(path)
    try:
        return parse_jsonl(path.read_text("utf-8")), {}
    except (OSError, ValueError) as e:
        raise _error(f"cannot read the decisions {path}: {e}") from e


async def _audit(args: argparse.Namespace) -> AuditReport:
    # deferred: the audit, the verifier and aiohttp, not for `--help`
    from ledger.client.http import HttpClient
    from notary.gateway.audit import AuditReport, audit_decision, check_policy
    from notary.gateway.salt import SaltError, default_salt_path, read_salt
    from notary.verifier.inputs import VerifierInputError
    from notary.verifier.trust import (
        complete_from_notary,
        load_jwks,
        parse_log_keys,
        with_policy_logs,
    )

    salt_file = args.salt_file
    if salt_file is None:
        if not _is_sqlite(args.decisions):
            raise _error("--salt-file is needed when --decisions is JSON lines")
        salt_file = default_salt_path(args.decisions)
    try:
        salt = read_salt(salt_file)
    except SaltError as e:
        raise _error(str(e)) from e
    revealed: dict[str, tuple[str, Policy]] = {}
    for path in args.policy:
        policy = _load_policy(path)
        revealed[policy.commitment(salt)] = (str(path), policy)
    decisions, policy_receipts = await _read_evidence(args.decisions)
    try:
        witness_policy = _audit_witness_policy(args)
        # The policy's log lines are pinned keys, as --log-key: the notary's fill in only when
        # neither names any (docs/verifying.md).
        pinned = with_policy_logs(parse_log_keys(args.log_key), witness_policy)
        needs_net = (args.jwks or "").startswith(("http://", "https://")) or (
            args.notary and (not args.jwks or not pinned))
        if needs_net:
            async with HttpClient(timeout=args.timeout) as fetcher:
                jwks = await load_jwks(args.jwks, fetcher) if args.jwks else None
                jwks, keys, _ = await complete_from_notary(jwks, pinned, args.notary, fetcher)
        else:
            jwks = await load_jwks(args.jwks, None) if args.jwks else None
            keys = pinned
        log_keys = list(keys)
    except VerifierInputError as e:
        raise _error(str(e)) from e
    proofs: dict[str, str] = {}
    if witness_policy is not None and witness_policy.requires_cosignatures and not args.offline:
        receipts = [e.receipt for e in decisions] + list(policy_receipts.values())
        proofs = await _upgraded_proofs([r for r in receipts if r is not None], args)
    policies = {c: p for c, (_, p) in revealed.items()}
    checks = [audit_decision(i, e, policies, server=args.server, jwks=jwks, log_keys=log_keys,
                             witness_policy=witness_policy, proofs=proofs)
              for i, e in enumerate(decisions, 1)]
    policy_checks = [check_policy(src, c, policy_receipts.get(c), server=args.server,
                                  jwks=jwks, log_keys=log_keys, witness_policy=witness_policy,
                                  proofs=proofs)
                     for c, (src, _) in revealed.items()]
    return AuditReport(checks, policy_checks)


def _audit_witness_policy(args: argparse.Namespace) -> TlogPolicy | None:
    """``--witness-policy`` (C2SP tlog-policy), or ``--witness`` with ``--quorum``, or None."""
    # deferred: the verifier, not for `--help`
    from notary.verifier.trust import build_trust, parse_witness_keys

    policy = witness_policy_from_args(args)
    if policy is not None:
        return policy
    # The same reading of --witness/--quorum as notary verify's (build_trust).
    return build_trust(None, (), parse_witness_keys(args.witness), args.quorum).witness_policy


async def _upgraded_proofs(receipts: list[Mapping[str, object]], args: argparse.Namespace
                           ) -> dict[str, str]:
    """Receipt id → the notary's current proof for it (into its newest witnessed checkpoint).

    Receipts are fetched from ``--notary`` or, without it, from the log URL in each receipt.
    A receipt that cannot be fetched keeps its own proof (and is judged on it).
    """
    # deferred: aiohttp, the receipts and the verifier, not for `--help`
    from ledger.client.http import FetchError, HttpClient
    from notary.core.receipts import Receipt, ReceiptFormatError
    from notary.verifier.inputs import log_base_url

    out: dict[str, str] = {}
    async with HttpClient(timeout=args.timeout) as fetcher:
        for given in receipts:
            try:
                receipt = Receipt.from_json(given)
            except ReceiptFormatError:
                continue  # judged as malformed by the audit itself
            rid = receipt.id
            base = args.notary.rstrip("/") if args.notary else log_base_url(receipt)
            if base is None or rid in out:
                continue
            try:
                doc = await fetcher.get_json(base + receipt_path(rid))
            except FetchError:
                continue
            proof = doc.get("proof") if isinstance(doc, dict) else None
            if isinstance(proof, str):
                out[rid] = proof
    return out


def _render_audit(report: AuditReport) -> str:
    # deferred: the audit, not for `--help`
    from notary.gateway.audit import AUDIT_LEVELS

    lines = []
    for p in report.policies:
        lines.append(f"policy {p.source}: commitment {p.commitment}")
        lines.append(f"  in the ledger: {p.ledger.status.upper()}"
                     + (f" ({p.ledger.reason})" if p.ledger.reason else ""))
    for d in report.decisions:
        rec = d.record
        mark = "ok " if d.valid else "BAD"
        lines.append(f"{mark} #{d.number:<4} {rec.get('time')}  {rec.get('decision'):<5}  "
                     f"{rec.get('tool')}")
        for name in AUDIT_LEVELS:
            level = d.level(name)
            if level.status != "passed":
                lines.append(f"       {name}: {level.status.upper()} {level.reason}")
    lines.append(f"{report.valid_decisions} of {len(report.decisions)} decisions re-checked: "
                 + ("ALL VALID" if report.valid else "NOT ALL VALID"))
    return "\n".join(lines)


def cmd_audit(args: argparse.Namespace) -> int:
    # deferred: the event loop, not for `--help`
    from ledger.process import event_loop

    report = event_loop.run(_audit(args))
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(_render_audit(report))
    return 0 if report.valid else 1


def cmd_decisions(args: argparse.Namespace) -> int:
    # deferred: the gateway's store (aiosqlite) and the event loop, not for `--help`
    from ledger.process import event_loop
    from notary.gateway.store import read_decisions

    if not _is_sqlite(args.state):
        raise _error(f"{args.state} is not a gateway state file")

    async def dump() -> None:
        async for evidence in read_decisions(args.state):
            print(json.dumps(evidence.to_json(), ensure_ascii=False, separators=(",", ":")))

    event_loop.run(dump())
    return 0


def cmd_gateway(args: argparse.Namespace) -> int:
    handlers = {None: cmd_run, "explain": cmd_explain, "commit-policy": cmd_commit_policy,
                "audit": cmd_audit, "decisions": cmd_decisions}
    return handlers[args.gateway_command](args)


# Parser --------------------------------------------------------------------------------------


class _Default(TypedDict, total=False):
    """The ``default`` keyword of ``add_argument``, or none."""

    default: object


def _upstream_flags(p: argparse.ArgumentParser, *, shared: bool) -> None:
    """Flags that name the upstream; on subcommands they must not reset the parent's values."""
    extra = _Default(default=argparse.SUPPRESS) if shared else _Default()
    p.add_argument("--upstream", metavar="CMD|URL", **extra,
                   help="the upstream MCP server: a command line (stdio) or an http(s) URL")
    p.add_argument("--upstream-env", action="append", metavar="KEY=VALUE",
                   **(extra if shared else _Default(default=[])),
                   help="environment for a command upstream (repeatable)")
    p.add_argument("--upstream-cwd", metavar="DIR", **extra,
                   help="working directory for a command upstream")
    p.add_argument("--upstream-mode", choices=["auto", "legacy"],
                   **(extra if shared else _Default(default="auto")),
                   help="protocol towards the upstream (default auto)")


_EPILOG = """\
policy format: see examples/gateway-policy.toml and notary/gateway/policy/format.py.
codes (in _meta["io.zkmcp/authorization-error"].code of an isError result):
  policy.AUTHORIZATION_DENIED          the policy does not allow the call (whatever rule)
  gateway.UPSTREAM_TOOL_FAILED         authorized and forwarded; the upstream failed
  gateway.IDEMPOTENCY_KEY_REQUIRED     non-idempotent tool without _meta["io.zkmcp/idempotency-key"]
  gateway.IDEMPOTENCY_KEY_CONFLICT     the key was used for another request
  gateway.IDEMPOTENCY_OUTCOME_UNKNOWN  the key's first call may have run; never re-run
  gateway.AUTHORIZATION_UNAVAILABLE    allowed, but the ledger did not take the decision
The policy file is re-read when its mtime, size or inode changes; the new commitment is
notarized before the new policy is used (a policy that fails to parse or commit is not used).
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``notary gateway`` and its subcommands to the CLI."""
    p = subparsers.add_parser(
        "gateway", help="run the authorization gateway in front of an MCP server",
        description="An MCP server in front of one upstream MCP server: every tools/call is "
                    "authorized against a committed policy before it is forwarded, every "
                    "decision is notarized, and results carry authorization, rs-tool-call/1 "
                    "and AER-1 receipts.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _upstream_flags(p, shared=False)
    p.add_argument("--policy", type=Path, help="the policy TOML file")
    p.add_argument("--salt-file", type=Path, help="the policy salt (default <state>.salt, "
                   "beside the state file)")
    p.add_argument("--state", type=Path, default=DEFAULT_STATE,
                   help=f"the gateway's SQLite state file (default {DEFAULT_STATE})")
    p.add_argument("--notary", metavar="URL", help="the notary (default $NOTARY_URL)")
    p.add_argument("--notary-public-url", metavar="URL",
                   help="the notary's URL as verifiers should see it in receipts' URLs")
    p.add_argument("--api-key-file", type=Path,
                   help="file holding the notary API key (default $NOTARY_API_KEY)")
    p.add_argument("--name", help="server name of the gateway (default: the policy's "
                   "gateway.name, else notary-gateway)")
    p.add_argument("--agent", help="the agent fact for every call (default: the policy's "
                   "gateway.agent, else the request's _meta['io.zkmcp/agent'], a claim the "
                   "gateway cannot authenticate)")
    p.add_argument("--http", metavar="HOST:PORT",
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--list-all-tools", action="store_true",
                   help="tools/list forwards every upstream tool (default: only the tools the "
                        "policy could allow)")
    p.add_argument("--resolve-paths", action=argparse.BooleanOptionalAction, default=None,
                   help="resolve path facts through symlinks on this host before the rules "
                        "apply (default: for a command upstream, not for a URL; "
                        "--no-resolve-paths for a command whose files are elsewhere, e.g. "
                        "in a container)")
    p.add_argument("--upstream-timeout", type=float, default=120.0, metavar="SECONDS",
                   help="per upstream call (default 120)")
    p.add_argument("--log-format", choices=["auto", "json", "console"], default="auto",
                   help="operator log format on stderr (default auto)")
    p.set_defaults(func=cmd_gateway, gateway_command=None)
    sub = p.add_subparsers(dest="gateway_command", metavar="{explain,commit-policy,audit,"
                           "decisions}")

    e = sub.add_parser("explain", help="per tool: the argument fields the policy constrains "
                       "and those it forwards unconstrained")
    e.add_argument("--policy", type=Path, required=True)
    _upstream_flags(e, shared=True)
    e.add_argument("--json", action="store_true")

    c = sub.add_parser("commit-policy", help="print the policy commitment (creates the salt "
                       "file, 0600, when absent)")
    c.add_argument("--policy", type=Path, required=True)
    c.add_argument("--salt-file", type=Path, default=argparse.SUPPRESS)
    c.add_argument("--state", type=Path, default=argparse.SUPPRESS,
                   help=f"the state file the salt sits beside (default {DEFAULT_STATE})")

    a = sub.add_parser("audit", help="re-check past decisions with the revealed policy and salt")
    a.add_argument("--policy", type=Path, action="append", required=True,
                   help="a revealed policy file (repeat for every version in force)")
    a.add_argument("--salt-file", type=Path, default=argparse.SUPPRESS,
                   help="the policy salt (default: beside the --decisions state file)")
    a.add_argument("--decisions", type=Path, required=True,
                   help="the gateway state file, or JSON lines from 'gateway decisions'")
    a.add_argument("--server", help="the gateway name the entries must carry")
    a.add_argument("--jwks", metavar="FILE|URL", help="trusted receipt keys")
    a.add_argument("--log-key", action="append", default=[], metavar="VKEY",
                   help="trusted log verifier key (repeatable)")
    a.add_argument("--notary", metavar="URL", default=argparse.SUPPRESS,
                   help="fetch the receipt keys and log key from this notary")
    a.add_argument("--witness", action="append", default=[], metavar="VKEY|@FILE",
                   help="witness cosignature key (repeatable): each decision's checkpoint must "
                        "carry the quorum; proofs are upgraded from the notary first")
    a.add_argument("--quorum", type=int, metavar="K",
                   help="witnesses that must have cosigned (default: all given)")
    a.add_argument("--witness-policy", metavar="FILE",
                   help="a C2SP tlog-policy file instead of --witness/--quorum")
    a.add_argument("--offline", action="store_true",
                   help="fetch nothing (no upgraded proofs: witness checks use the saved ones)")
    a.add_argument("--timeout", type=float, default=10.0)
    a.add_argument("--json", action="store_true")

    d = sub.add_parser("decisions", help="print the decision evidence of a state file as "
                       "JSON lines {record, facts, receipt}")
    d.add_argument("--state", type=Path, default=argparse.SUPPRESS)
