"""The authorization gateway end to end, through the real ``mcp`` client.

Every test runs the real notary application on a loopback socket in this process and a real
upstream MCP server (``tests/gateway_upstream.py``) as a stdio subprocess that appends every
``tools/call`` it receives to a log file, so "the upstream saw nothing" is checked against what
the upstream process itself recorded. The gateway runs in process (``mcp.Client(server)``,
protocol modes ``auto`` = 2026-07-28 and ``legacy`` = 2025-11-25) and, for the wire checks, as
``notary gateway`` over stdio. Receipts are verified offline with ``notary.core.verification``
and every
AER-1 receipt is validated against the schema with ``jsonschema``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, CallToolResult, RequestParamsMeta, TextContent

from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer
from notary.core import aer1
from notary.core.meta import AER1_META_KEY, TOOL_CALL_META_KEY
from notary.core.records import hashed_result
from notary.core.verification import verify_receipt
from notary.gateway import GatewayConfig, build_gateway, codes
from notary.gateway.agent import AgentRecorder, aer1_of, to_wire
from notary.gateway.policy import PolicyError, facts_sha256, sha256_jcs
from notary.gateway.server import GatewayStartError
from notary.gateway.store import (
    DecisionEvidence,
    GatewayStore,
    KeyClaim,
    read_decisions,
    read_policy_receipts,
)
from notary.gateway.toolcalls import request_digest
from notary.sdk import (
    NotaryClient,
    NotaryHTTPError,
    NotaryUnavailableError,
    received_wire,
    verify_tool_result,
)
from tests.gateway_rig import (
    GATEWAY,
    POLICY,
    Rig,
    assert_aer1,
    assert_notarized,
    assert_receipt_verifies,
)
from tests.notary_server import free_port

REPO = Path(__file__).resolve().parents[3]
AGENT = cast(RequestParamsMeta, {codes.AGENT_META_KEY: "LegalAgent"})
APPROVED = {"amount": 2750, "recipient": "client-settlement-account",
            "memo": "Thompson settlement disbursement", "approval": {"approved": True}}

def key_meta(key: str, **extra: Any) -> RequestParamsMeta:
    return cast(RequestParamsMeta, {**AGENT, codes.IDEMPOTENCY_META_KEY: key, **extra})


@pytest.fixture(params=["auto", "legacy"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# Checks ----------------------------------------------------------------------------------------


def gateway_meta(result: CallToolResult) -> dict[str, Any]:
    """The result's _meta without the SDK's own serverInfo stamp (2026-07-28 only)."""
    return {k: v for k, v in (result.meta or {}).items() if k != codes.SERVER_INFO_META_KEY}


def assert_authorized(rig: Rig, result: CallToolResult, tool: str,
                      facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """The authorization receipt: public commitments only, and in the ledger."""
    block: dict[str, Any] = (result.meta or {})[codes.AUTH_RECEIPT_META_KEY]
    assert set(block) == {"spec", "decision", "tool", "facts_sha256", "policy_commitment",
                          "time", "salt", "receipt"}
    assert block["spec"] == codes.DECISION_SPEC
    assert (block["decision"], block["tool"]) == ("allow", tool)
    assert block["policy_commitment"] == rig.commitment
    if facts is not None:
        assert block["facts_sha256"] == facts_sha256(facts)
    record = {k: block[k] for k in ("decision", "tool", "facts_sha256", "policy_commitment",
                                    "time", "salt")}
    receipt = block["receipt"]
    assert receipt["call_sha256"] == sha256_jcs(record)
    assert (receipt["server"], receipt["tool"]) == (GATEWAY, codes.POLICY_DECISION_TOOL)
    assert_receipt_verifies(rig, receipt)
    return block


def assert_refused(result: CallToolResult, code: str) -> None:
    """An isError result carrying only the public code (and nothing about the policy)."""
    assert result.is_error
    assert gateway_meta(result) == {codes.AUTH_ERROR_META_KEY: {"code": code}}
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    assert result.content[0].text.startswith(code + ":")
    assert result.structured_content is None


# In process: authorization -----------------------------------------------------------------


async def test_allowed_denied_and_unknown(rig: Rig, mode: str) -> None:
    async with Client(build_gateway(rig.config()), mode=mode) as client:
        listed = await client.list_tools()
        # Only what the policy could allow is offered: admin.delete is the upstream's only.
        assert {t.name for t in listed.tools} == {
            "payments.transfer", "echo", "weather.forecast", "weather.legacy",
            "weather.broken", "fail", "crash"}
        assert rig.calls() == []  # listing is not calling

        # Allowed: forwarded with the arguments unchanged; upstream _meta kept.
        result = await client.call_tool("echo", {"text": "hi"}, meta=AGENT)
        assert not result.is_error and result.content[0].text == "hi"  # type: ignore[union-attr]
        meta = result.meta or {}
        assert meta["example.com/trace"] == "t-1"
        assert_authorized(rig, result, "echo", {"tool": "echo", "agent": "LegalAgent"})
        assert_notarized(rig, result, "echo", {"text": "hi"})
        if mode == "auto":
            # The upstream's serverInfo stamp is renamed, never passed off as the gateway's.
            assert meta[codes.SERVER_INFO_META_KEY]["name"] == GATEWAY
            assert meta[codes.UPSTREAM_SERVER_INFO_META_KEY]["name"] == "recording-upstream"
        call = rig.calls()[-1]
        assert (call["tool"], call["arguments"]) == ("echo", {"text": "hi"})
        assert not any(k.startswith("io.zkmcp/") for k in call["meta_keys"])

        # A string amount is coerced for the facts, but forwarded exactly as sent.
        args = {**APPROVED, "amount": "2750"}
        result = await client.call_tool("payments.transfer", args, meta=key_meta(f"a-{mode}"))
        assert not result.is_error, result
        assert result.structured_content == {"transfer_id": "tr_1", "amount": 2750,
                                             "recipient": "client-settlement-account"}
        assert_authorized(rig, result, "payments.transfer",
                          {"tool": "payments.transfer", "agent": "LegalAgent", "amount": 2750,
                           "approved": True})
        assert_notarized(rig, result, "payments.transfer", args)
        assert rig.calls()[-1]["arguments"] == args

        seen = len(rig.calls())
        denied: list[tuple[str, dict[str, Any], RequestParamsMeta]] = [
            ("payments.transfer", {**APPROVED, "amount": 9000}, key_meta(f"b-{mode}")),
            ("payments.transfer", {"amount": 10, "recipient": "x"}, key_meta(f"c-{mode}")),
            ("payments.transfer", APPROVED, key_meta(f"d-{mode}", **{
                codes.AGENT_META_KEY: "Mallory"})),
            ("payments.transfer", APPROVED,
             cast(RequestParamsMeta, {codes.IDEMPOTENCY_META_KEY: f"e-{mode}"})),
            ("admin.delete", {"what": "everything"}, AGENT),   # offered upstream, not allowed
            ("no.such.tool", {}, AGENT),                        # unknown everywhere
            ("x" * 300, {}, AGENT),                             # not even a valid name
        ]
        for tool, arguments, request_meta in denied:
            result = await client.call_tool(tool, arguments, meta=request_meta)
            assert_refused(result, codes.AUTHORIZATION_DENIED)
        # Non-idempotent without a key: its own code, nothing evaluated.
        result = await client.call_tool("payments.transfer", APPROVED, meta=AGENT)
        assert_refused(result, codes.IDEMPOTENCY_KEY_REQUIRED)
        assert len(rig.calls()) == seen  # the upstream saw none of them

    decisions = [e async for e in read_decisions(rig.state)]
    assert [e.record["decision"] for e in decisions] == ["allow"] * 2 + ["deny"] * 6
    for evidence in decisions:  # denials are in the ledger too
        assert evidence.receipt is not None
        assert evidence.receipt["call_sha256"] == sha256_jcs(evidence.record)
        assert_receipt_verifies(rig, evidence.receipt)


async def test_upstream_failures_keep_the_authorization(rig: Rig) -> None:
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        # An isError result from the tool: its content is kept, the code added.
        result = await client.call_tool("fail", {}, meta=key_meta("f-1"))
        assert result.is_error and result.content[0].text == "disk on fire"  # type: ignore[union-attr]
        assert gateway_meta(result)[codes.AUTH_ERROR_META_KEY] == {
            "code": codes.UPSTREAM_TOOL_FAILED}
        assert_authorized(rig, result, "fail")
        assert_notarized(rig, result, "fail", {})
        assert (result.meta or {})[AER1_META_KEY]["verification_status"] == "execution_observed"
        first_failure = result

        # A JSON-RPC error from the upstream reaches the client as the upstream sent it: code,
        # message and data (the refusal it stands for is notarized for the ledger's record).
        before = await rig.size()
        with pytest.raises(MCPError) as info:
            await client.call_tool("crash", {}, meta=AGENT)
        assert (info.value.error.code, info.value.error.message) == (
            INTERNAL_ERROR, "the upstream crashed")
        assert await rig.size() == before + 2  # the decision, and the failure it stands for

        # A result that breaks the tool's own output schema.
        result = await client.call_tool("weather.broken", {"city": "Oslo"}, meta=AGENT)
        assert result.is_error and result.structured_content is None
        assert gateway_meta(result)[codes.AUTH_ERROR_META_KEY] == {
            "code": codes.UPSTREAM_TOOL_FAILED}
        assert_authorized(rig, result, "weather.broken")

        # A retry of the failed non-idempotent call returns the recorded failure.
        again = await client.call_tool("fail", {}, meta=key_meta("f-1"))
        assert again.is_error and (again.meta or {})[codes.REPLAY_META_KEY] is True
        assert again.content == first_failure.content
        assert (again.meta or {})[codes.AUTH_RECEIPT_META_KEY] == \
            (first_failure.meta or {})[codes.AUTH_RECEIPT_META_KEY]
    assert [c["tool"] for c in rig.calls()] == ["fail", "crash", "weather.broken"]


async def test_output_schema_projection(rig: Rig, mode: str) -> None:
    async with Client(build_gateway(rig.config()), mode=mode) as client:
        # The client validates results against the schemas the gateway lists (the upstream's).
        result = await client.call_tool("weather.forecast", {"city": "Oslo"}, meta=AGENT)
        assert result.structured_content == {"city": "Oslo", "temperature_c": 19.5}
        assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
        assert_notarized(rig, result, "weather.forecast", {"city": "Oslo"})

        result = await client.call_tool("weather.legacy", {"city": "Bergen"}, meta=AGENT)
        assert result.structured_content == {"city": "Bergen", "temperature_c": 7}
        assert_notarized(rig, result, "weather.legacy", {"city": "Bergen"})


async def test_tools_list_offers_what_the_policy_could_allow(rig: Rig) -> None:
    everything = {"payments.transfer", "echo", "weather.forecast", "weather.legacy",
                  "weather.broken", "fail", "crash", "admin.delete"}
    async with Client(build_gateway(rig.config(list_all_tools=True)), mode="auto") as client:
        assert {t.name for t in (await client.list_tools()).tools} == everything
    # payments.transfer has a rule on the agent: an agent it can never allow is not offered.
    async with Client(build_gateway(rig.config(agent="Mallory")), mode="legacy") as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert listed == everything - {"admin.delete", "payments.transfer"}
        # Still denied if called anyway (listing is a courtesy, the policy decides).
        result = await client.call_tool("admin.delete", {"what": "x"})
        assert_refused(result, codes.AUTHORIZATION_DENIED)
    assert rig.calls() == []


async def test_state_file_is_private(rig: Rig) -> None:
    rig.state.write_bytes(b"")  # an existing file others could read is fixed too
    os.chmod(rig.state, 0o644)
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        await client.call_tool("echo", {"text": "hi"}, meta=AGENT)
        await client.call_tool("payments.transfer", APPROVED, meta=key_meta("P1"))
        files = [rig.state, rig.state.with_name(rig.state.name + "-wal"),
                 rig.state.with_name(rig.state.name + "-shm")]
        for path in files:  # results, facts and salts: the gateway's user only
            assert path.exists(), path
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, (path, oct(path.stat().st_mode))
    fresh = rig.tmp / "fresh" / "state.db"
    store = await GatewayStore(fresh).open()
    await store.close()
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600


async def test_the_agent_fact_is_a_claim_unless_the_operator_fixes_it(rig: Rig) -> None:
    """Without --agent (or the policy's gateway.agent) the agent fact is whatever the caller
    claims in _meta; with it, the configured agent is the fact and a claim changes nothing."""
    mallory = cast(RequestParamsMeta, {codes.AGENT_META_KEY: "Mallory"})
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        # key_meta claims LegalAgent, the agent payments.transfer requires.
        result = await client.call_tool("payments.transfer", APPROVED, meta=key_meta("c-1"))
        assert not result.is_error  # the claim alone got it through
        unclaimed = await client.call_tool("payments.transfer", APPROVED, meta=cast(
            RequestParamsMeta, {codes.IDEMPOTENCY_META_KEY: "c-2"}))
        assert_refused(unclaimed, codes.AUTHORIZATION_DENIED)  # no agent fact at all
    async with Client(build_gateway(rig.config(agent="OpsAgent")), mode="auto") as client:
        result = await client.call_tool("payments.transfer", APPROVED, meta=key_meta("c-4"))
        assert_refused(result, codes.AUTHORIZATION_DENIED)  # the claim is ignored
        echo = await client.call_tool("echo", {"text": "x"}, meta=mallory)
        assert_authorized(rig, echo, "echo", {"tool": "echo", "agent": "OpsAgent"})
    rig.policy.write_text(rig.policy.read_text().replace(
        '[gateway]\n', '[gateway]\nagent = "LegalAgent"\n'))
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        result = await client.call_tool("payments.transfer", APPROVED, meta=key_meta(
            "c-3", **{codes.AGENT_META_KEY: "Mallory"}))
        assert_authorized(rig, result, "payments.transfer")  # the policy's agent, not Mallory
        echo = await client.call_tool("echo", {"text": "x"}, meta=mallory)
        assert_authorized(rig, echo, "echo", {"tool": "echo", "agent": "LegalAgent"})
    async with Client(build_gateway(rig.config(agent="OpsAgent")), mode="auto") as client:
        echo = await client.call_tool("echo", {"text": "x"}, meta=mallory)
        assert_authorized(rig, echo, "echo", {"tool": "echo", "agent": "OpsAgent"})  # flag first
    assert [c["tool"] for c in rig.calls()] == [
        "payments.transfer", "echo", "payments.transfer", "echo", "echo"]


async def test_a_policy_path_through_a_symlink_is_refused_at_start(rig: Rig) -> None:
    """Path facts are resolved on this host for a local upstream, so a policy prefix through
    a symlink could never match: the gateway refuses the policy instead of starting."""
    real = (rig.tmp / "real").resolve()
    real.mkdir()
    (rig.tmp / "alias").symlink_to(real)
    rig.policy.write_text(POLICY.replace("LIMIT", "5000") + f"""
[tools.read]
facts.path = {{ from = "path", type = "path" }}
rules = [{{ fact = "path", op = "not prefix", value = "{rig.tmp.resolve()}/alias" }}]
""")
    with pytest.raises(BaseException) as caught:  # raised in the lifespan's task group
        async with Client(build_gateway(rig.config()), mode="auto"):
            pass
    assert _has_policy_error(caught.value), caught.value
    assert await read_policy_receipts(rig.state) == {}  # never committed, never used
    assert rig.calls() == []


def _has_policy_error(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return any(_has_policy_error(e) for e in error.exceptions)
    # The start-up failure (one line for the operator) says what the policy error said.
    return isinstance(error, PolicyError | GatewayStartError) \
        and "a symlink on the way" in str(error)


# Idempotency ---------------------------------------------------------------------------------


async def test_idempotent_retries_never_run_twice(rig: Rig) -> None:
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        first = await client.call_tool("payments.transfer", APPROVED, meta=key_meta("K1"))
        assert not first.is_error
        assert (first.structured_content or {})["transfer_id"] == "tr_1"
        again = await client.call_tool("payments.transfer", APPROVED, meta=key_meta("K1"))
        assert again.structured_content == first.structured_content
        assert (again.meta or {})[codes.REPLAY_META_KEY] is True
        # The replay carries the original receipts, which still verify.
        assert (again.meta or {})[codes.AUTH_RECEIPT_META_KEY] == \
            (first.meta or {})[codes.AUTH_RECEIPT_META_KEY]
        assert_notarized(rig, again, "payments.transfer", APPROVED)

        other = await client.call_tool("payments.transfer", {**APPROVED, "amount": 100},
                                       meta=key_meta("K1"))
        assert_refused(other, codes.IDEMPOTENCY_KEY_CONFLICT)

        # Concurrent duplicates: one execution.
        results = await asyncio.gather(*[
            client.call_tool("payments.transfer", APPROVED, meta=key_meta("K2"))
            for _ in range(5)])
        assert len({r.structured_content["transfer_id"] for r in results}) == 1
        assert len(rig.calls("payments.transfer")) == 2

    # The response was lost and the gateway restarted: the retry gets the recorded outcome.
    async with Client(build_gateway(rig.config()), mode="legacy") as client:
        again = await client.call_tool("payments.transfer", APPROVED, meta=key_meta("K1"))
        assert again.structured_content == first.structured_content
        # A crash between forwarding and recording: never executed a second time.
        store = await GatewayStore(rig.state).open()
        try:
            digest = request_digest("payments.transfer", APPROVED, "LegalAgent")
            allowed = {"time": "now", "tool": "payments.transfer", "decision": "allow"}
            await store.save_decision(DecisionEvidence(allowed, {}, None),
                                      KeyClaim("K3", "payments.transfer", digest, "now"))
        finally:
            await store.close()
        unknown = await client.call_tool("payments.transfer", APPROVED, meta=key_meta("K3"))
        assert_refused(unknown, codes.IDEMPOTENCY_OUTCOME_UNKNOWN)
    assert len(rig.calls("payments.transfer")) == 2


async def test_a_keyed_call_not_authorized_leaves_its_key_free(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that is denied, whose decision the ledger did not take, or whose authorization
    failed records nothing under its key (however the claim is ordered around the decision):
    a retry under it is evaluated afresh, and runs once."""
    real_notarize, real_save = NotaryClient.notarize, GatewayStore.save_decision
    failures = {"notarize": 0, "save": 0}

    async def notarize(self: NotaryClient, server: str, tool: str, digest: str) -> Any:
        if tool == codes.POLICY_DECISION_TOOL and failures["notarize"]:
            failures["notarize"] -= 1
            raise NotaryUnavailableError("down for the test", attempts=1)
        return await real_notarize(self, server, tool, digest)

    async def save_decision(self: GatewayStore, evidence: Any, claim: Any = None) -> None:
        if failures["save"]:
            failures["save"] -= 1
            raise OSError("disk gone for the test")
        await real_save(self, evidence, claim)

    monkeypatch.setattr(NotaryClient, "notarize", notarize)
    monkeypatch.setattr(GatewayStore, "save_decision", save_decision)
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        denied = await client.call_tool("payments.transfer", {**APPROVED, "amount": 9000},
                                        meta=key_meta("N1"))
        assert_refused(denied, codes.AUTHORIZATION_DENIED)
        failures["notarize"] = 1
        unrecorded = await client.call_tool("payments.transfer", APPROVED, meta=key_meta("N2"))
        assert_refused(unrecorded, codes.AUTHORIZATION_UNAVAILABLE)
        failures["save"] = 1
        with contextlib.suppress(MCPError):  # the SDK's generic error, or a refusal
            await client.call_tool("payments.transfer", APPROVED, meta=key_meta("N3"))
        assert rig.calls("payments.transfer") == []
        store = await GatewayStore(rig.state).open()
        try:
            for key in ("N1", "N2", "N3"):
                assert await store.lookup(key) is None, key
        finally:
            await store.close()
        for n, key in enumerate(("N1", "N2", "N3"), 1):
            result = await client.call_tool("payments.transfer", APPROVED, meta=key_meta(key))
            assert_authorized(rig, result, "payments.transfer")
            again = await client.call_tool("payments.transfer", APPROVED, meta=key_meta(key))
            assert (again.meta or {})[codes.REPLAY_META_KEY] is True
            assert len(rig.calls("payments.transfer")) == n


# Ledger, audit, reload ------------------------------------------------------------------------


async def test_ledger_entries_and_audit(rig: Rig) -> None:
    size0 = await rig.size()
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        await client.call_tool("echo", {"text": "one"}, meta=AGENT)
        await client.call_tool("payments.transfer", APPROVED, meta=key_meta("L1"))
        await client.call_tool("payments.transfer", {**APPROVED, "amount": 6000},
                               meta=key_meta("L2"))
        await client.call_tool("admin.delete", {"what": "x"}, meta=AGENT)
    # 1 policy commitment + 4 decisions + 2 notarized results.
    assert await rig.size() == size0 + 7
    policies = await read_policy_receipts(rig.state)
    receipt = policies[rig.commitment]
    assert receipt is not None and receipt["call_sha256"] == rig.commitment
    assert (receipt["server"], receipt["tool"]) == (GATEWAY, codes.POLICY_COMMIT_TOOL)
    assert_receipt_verifies(rig, receipt)

    jwks_file = rig.tmp / "jwks.json"
    jwks_file.write_text(json.dumps(rig.jwks.to_json()))
    trust = ["--jwks", str(jwks_file), "--log-key", rig.vkey, "--server", GATEWAY]
    base = ["gateway", "audit", "--policy", str(rig.policy), "--salt-file", str(rig.salt)]
    code, out = await rig.cli(*base, "--decisions", str(rig.state), *trust, "--json")
    report = json.loads(out)
    assert code == 0 and report["valid"], out
    assert report["summary"] == {"decisions": 4, "valid": 4}
    assert report["policies"][0]["ledger"]["status"] == "passed"
    assert [d["record"]["decision"] for d in report["decisions"]] == [
        "allow", "allow", "deny", "deny"]
    code, text = await rig.cli(*base, "--decisions", str(rig.state), *trust)
    assert code == 0 and "4 of 4 decisions re-checked: ALL VALID" in text, text
    assert "in the ledger: PASSED" in text

    # Witnesses trusted in the audit too (simple form or C2SP tlog-policy): this notary has no
    # witnesses, so even the proofs upgraded from it carry no cosignature, and that is said.
    witness = CosignatureSigner.generate("w.example")
    code, out = await rig.cli(*base, "--decisions", str(rig.state), *trust, "--notary", rig.url,
                              "--witness", witness.verifier_key_text(), "--json")
    report = json.loads(out)
    assert code == 1 and not any(d["valid"] for d in report["decisions"])
    assert "0 of 1 witness cosigned" in report["decisions"][0]["levels"]["ledger"]["reason"]
    policy_file = rig.tmp / "witnesses.policy"
    policy_file.write_text(f"witness w {witness.verifier_key_text()}\nquorum none\n")
    code, out = await rig.cli(*base, "--decisions", str(rig.state), *trust,
                              "--witness-policy", str(policy_file), "--json")
    assert code == 0 and json.loads(out)["valid"], out
    # A policy's log lines are pinned log keys (as --log-key): the notary's own keys then fill
    # nothing in, so a policy naming another log trusts none of this notary's receipts.
    other_log = Ed25519Signer.generate("other.example").verifier_key_text()
    other_policy = rig.tmp / "other-log.policy"
    other_policy.write_text(f"log {other_log}\nquorum none\n")
    code, out = await rig.cli(*base, "--decisions", str(rig.state), "--jwks", str(jwks_file),
                              "--server", GATEWAY, "--notary", rig.url, "--witness-policy",
                              str(other_policy), "--json")
    assert code == 1 and not any(d["valid"] for d in json.loads(out)["decisions"]), out
    own_policy = rig.tmp / "own-log.policy"
    own_policy.write_text(f"log {rig.vkey}\nquorum none\n")
    code, out = await rig.cli(*base, "--decisions", str(rig.state), "--jwks", str(jwks_file),
                              "--server", GATEWAY, "--witness-policy", str(own_policy), "--json")
    assert code == 0 and json.loads(out)["valid"], out

    # Exported evidence, tampered: the audit catches each kind of lie.
    code, lines = await rig.cli("gateway", "decisions", "--state", str(rig.state))
    evidence = [json.loads(line) for line in lines.splitlines()]
    evidence[1]["facts"]["amount"] = 1            # facts that were not decided on
    evidence[2]["record"]["decision"] = "allow"   # a denial rewritten as an allowance
    tampered = rig.tmp / "tampered.jsonl"
    tampered.write_text("\n".join(json.dumps(e) for e in evidence) + "\n")
    code, out = await rig.cli(*base, "--decisions", str(tampered), *trust, "--json")
    report = json.loads(out)
    assert code == 1 and [d["valid"] for d in report["decisions"]] == [True, False, False, True]
    assert report["decisions"][1]["levels"]["facts"]["status"] == "failed"
    assert report["decisions"][2]["levels"]["decision"]["status"] == "failed"
    assert report["decisions"][2]["levels"]["ledger"]["status"] == "failed"

    # Another salt: the revealed policy is not the committed one.
    wrong = rig.tmp / "wrong.salt"
    wrong.write_text("ab" * 32 + "\n")
    code, out = await rig.cli("gateway", "audit", "--policy", str(rig.policy), "--salt-file",
                        str(wrong), "--decisions", str(rig.state), *trust, "--json")
    assert code == 1
    assert all(d["levels"]["policy"]["status"] == "failed" for d in json.loads(out)["decisions"])


async def test_policy_reload_is_committed_first(rig: Rig) -> None:
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        first = await client.call_tool("payments.transfer", {**APPROVED, "amount": 3000},
                                       meta=key_meta("R1"))
        old = (first.meta or {})[codes.AUTH_RECEIPT_META_KEY]["policy_commitment"]
        rig.write_policy(900)
        denied = await client.call_tool("payments.transfer", {**APPROVED, "amount": 3000},
                                        meta=key_meta("R2"))
        assert_refused(denied, codes.AUTHORIZATION_DENIED)
        small = await client.call_tool("payments.transfer", {**APPROVED, "amount": 800},
                                       meta=key_meta("R3"))
        new = assert_authorized(rig, small, "payments.transfer")["policy_commitment"]
        assert new != old and new == rig.commitment
        # A broken edit is not used: the last committed policy stays in force.
        rig.policy.write_text("version = 1\n[tools.echo]\nrulez = []\n")
        kept = await client.call_tool("payments.transfer", {**APPROVED, "amount": 850},
                                      meta=key_meta("R4"))
        assert (kept.meta or {})[codes.AUTH_RECEIPT_META_KEY]["policy_commitment"] == new
    policies = await read_policy_receipts(rig.state)
    assert set(policies) == {old, new}
    for commitment, receipt in policies.items():
        assert receipt is not None and receipt["call_sha256"] == commitment
        assert_receipt_verifies(rig, receipt)


# Decision records against another tenant of the notary ----------------------------------------

SQUAT_TIME = "2026-03-01T12:00:00.000Z"


def unsalted_decision_digest(rig: Rig, tool: str, facts: dict[str, Any]) -> str:
    """What another tenant can compute of an allowed decision without any secret.

    Every member of an unsalted record is public or guessable: the policy commitment is in
    the ledger, the facts of a call without arguments are its tool and agent, and the time
    is one of a thousand milliseconds a second.
    """
    return sha256_jcs({"decision": "allow", "tool": tool, "facts_sha256": facts_sha256(facts),
                       "policy_commitment": rig.commitment, "time": SQUAT_TIME})


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway decides in the millisecond the other tenant covered in advance."""
    monkeypatch.setattr("notary.gateway.authorization.now_issued_at", lambda: SQUAT_TIME)


async def test_predicted_decisions_under_another_name_do_not_block_calls(
        rig: Rig, frozen_clock: None) -> None:
    """Another account pre-notarizes the predictable digest under a name of its own: the
    gateway's decision must still be logged (its record has a salt nobody could predict)."""
    facts = {"tool": "echo", "agent": "LegalAgent"}
    predicted = unsalted_decision_digest(rig, "echo", facts)
    async with Client(build_gateway(rig.config()), mode="auto") as client, \
            NotaryClient(rig.url, rig.other_key) as tenant:
        await tenant.notarize("squatter", codes.POLICY_DECISION_TOOL, predicted)
        result = await client.call_tool("echo", {"text": "hi"}, meta=AGENT)
        assert gateway_meta(result).get(codes.AUTH_ERROR_META_KEY) is None, result
        block = assert_authorized(rig, result, "echo", facts)
        assert block["receipt"]["call_sha256"] != predicted
    assert [c["tool"] for c in rig.calls()] == ["echo"]


async def test_a_squatted_receipt_is_never_taken_as_the_gateways(
        rig: Rig, frozen_clock: None) -> None:
    """Another account notarizes the predictable digest under the gateway's own server and
    tool names: the gateway must not hand out that tenant's receipt as its authorization."""
    facts = {"tool": "weather.forecast", "agent": "LegalAgent"}
    predicted = unsalted_decision_digest(rig, "weather.forecast", facts)
    async with Client(build_gateway(rig.config()), mode="auto") as client, \
            NotaryClient(rig.url, rig.other_key) as tenant:
        try:
            squat = (await tenant.notarize(GATEWAY, codes.POLICY_DECISION_TOOL, predicted)).id
        except NotaryHTTPError as e:  # a notary that keeps a server name for its account
            assert (e.status, e.code) == (403, "server_not_allowed"), e
            squat = None
        result = await client.call_tool("weather.forecast", {"city": "Oslo"}, meta=AGENT)
        receipt = gateway_meta(result)[codes.AUTH_RECEIPT_META_KEY]["receipt"]
        assert receipt["call_sha256"] != predicted and receipt["id"] != squat
        assert_authorized(rig, result, "weather.forecast", facts)
    # The salt is kept with the evidence: the audit rebuilds every record's digest from it.
    decisions = [e async for e in read_decisions(rig.state)]
    assert len(decisions) == 1 and len(decisions[0].record["salt"]) == 32
    jwks_file = rig.tmp / "jwks.json"
    jwks_file.write_text(json.dumps(rig.jwks.to_json()))
    code, out = await rig.cli("gateway", "audit", "--policy", str(rig.policy), "--salt-file",
                              str(rig.salt), "--decisions", str(rig.state), "--jwks",
                              str(jwks_file), "--log-key", rig.vkey, "--server", GATEWAY,
                              "--json")
    assert code == 0 and json.loads(out)["summary"] == {"decisions": 1, "valid": 1}, out


async def test_a_receipt_for_another_digest_is_refused(rig: Rig,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the notary (or a client between) hands back, the gateway rebuilds its own
    record's digest and takes only a receipt for exactly that record."""
    async with NotaryClient(rig.url, rig.other_key) as tenant:
        foreign = await tenant.notarize(GATEWAY + "-other", codes.POLICY_DECISION_TOOL,
                                        "ab" * 32)
    real = NotaryClient.notarize

    async def swapped(self: NotaryClient, server: str, tool: str, digest: str) -> Any:
        if tool == codes.POLICY_DECISION_TOOL:
            return foreign
        return await real(self, server, tool, digest)

    monkeypatch.setattr(NotaryClient, "notarize", swapped)
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        result = await client.call_tool("echo", {"text": "hi"}, meta=AGENT)
        assert_refused(result, codes.AUTHORIZATION_UNAVAILABLE)
    assert rig.calls() == []
    decisions = [e async for e in read_decisions(rig.state)]
    assert [e.receipt for e in decisions] == [None]  # the foreign receipt is not evidence


# Over stdio: the wire -------------------------------------------------------------------------


class TapStream:
    """A client read stream that keeps every raw message (the JSON-RPC results as dicts)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seen: list[Any] = []

    async def receive(self) -> Any:
        message = await self.inner.receive()
        self.seen.append(message)
        return message

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> TapStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> TapStream:
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self.inner.__aexit__(*exc)
        return result

    def results(self) -> list[dict[str, Any]]:
        out = []
        for message in self.seen:
            result = getattr(getattr(message, "message", None), "result", None)
            if isinstance(result, dict) and "content" in result:
                out.append(result)
        return out


@contextlib.asynccontextmanager
async def tapped_stdio(params: StdioServerParameters, taps: list[TapStream]
                       ) -> AsyncIterator[Any]:
    with open(os.devnull, "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (read, write):
            tap = TapStream(read)
            taps.append(tap)
            yield tap, write


def gateway_command(rig: Rig, *extra: str) -> list[str]:
    key_file = rig.tmp / "notary.key"
    key_file.write_text(rig.key)
    return ["-m", "notary.cli.main", "gateway",
            "--upstream", " ".join(rig.upstream_command()), "--upstream-cwd", str(REPO),
            "--policy", str(rig.policy), "--salt-file", str(rig.salt),
            "--state", str(rig.state), "--notary", rig.url, "--api-key-file", str(key_file),
            "--agent", "LegalAgent", "--log-format", "json", *extra]


async def test_stdio_gateway_puts_receipt_on_the_wire(rig: Rig, mode: str) -> None:
    params = StdioServerParameters(command=sys.executable, args=gateway_command(rig),
                                   cwd=str(REPO), env={"PYTHONPATH": str(REPO)})
    taps: list[TapStream] = []
    async with Client(tapped_stdio(params, taps), mode=mode) as client:
        result = await client.call_tool("payments.transfer", APPROVED, meta=cast(
            RequestParamsMeta, {codes.IDEMPOTENCY_META_KEY: f"w-{mode}"}))
        assert not result.is_error
        denied = await client.call_tool("admin.delete", {"what": "x"})
        assert_refused(denied, codes.AUTHORIZATION_DENIED)
    raw = taps[0].results()
    assert len(raw) == 2
    wire, refused = raw
    # result._receipt is on the wire in both protocol modes, equal to the _meta mirror ...
    receipt = wire[aer1.RESULT_KEY]
    assert receipt == wire["_meta"][AER1_META_KEY]
    assert_aer1(rig, receipt, "payments.transfer", aer1.PROVENANCE_GATEWAY)
    # ... but the SDK's result model drops unknown top-level members.
    assert aer1.RESULT_KEY not in result.model_dump(by_alias=True)
    assert aer1.RESULT_KEY not in refused  # nothing ran, nothing observed
    if mode == "auto":
        assert wire["_meta"][codes.SERVER_INFO_META_KEY]["name"] == GATEWAY
        assert wire["_meta"][codes.UPSTREAM_SERVER_INFO_META_KEY]["name"] == \
            "recording-upstream"
    assert [c["tool"] for c in rig.calls()] == ["payments.transfer"]


# The agent side -------------------------------------------------------------------------------


async def test_agent_recorder_logs_what_the_agent_received(rig: Rig) -> None:
    async with Client(build_gateway(rig.config()), mode="auto") as client, \
            NotaryClient(rig.url, rig.key) as notary:
        agent = AgentRecorder(client, notary, server_name="agent-view")
        result = await agent.call_tool("echo", {"text": "seen"}, meta=AGENT)
        receipt = aer1_of(result)
        assert receipt is not None
        assert_aer1(rig, receipt, "echo", aer1.PROVENANCE_AGENT)
        assert receipt["verification_status"] == "not_verified"
        assert receipt["anchor"]["receipt"]["server"] == "agent-view"
        # The gateway's own receipts are kept beside the agent's.
        meta = result.meta or {}
        assert meta[AER1_META_KEY]["provenance_class"] == aer1.PROVENANCE_GATEWAY
        assert_notarized(rig, result, "echo", {"text": "seen"})
        assert to_wire(result)[aer1.RESULT_KEY] == receipt
        # Agent and gateway hashed the same content (different salts and servers).
        assert receipt["output_hash"] != meta[AER1_META_KEY]["output_hash"]


# Over streamable HTTP -------------------------------------------------------------------------


async def test_http_gateway_both_modes(rig: Rig) -> None:
    port = free_port()
    with open(rig.tmp / "gateway.err", "wb") as errlog:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *gateway_command(rig, "--http", f"127.0.0.1:{port}"),
            cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=asyncio.subprocess.DEVNULL, stdout=errlog, stderr=errlog)
    try:
        for _ in range(300):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                assert proc.returncode is None, (rig.tmp / "gateway.err").read_text()
                await asyncio.sleep(0.05)
        for mode in ("auto", "legacy"):
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
                result = await client.call_tool("weather.forecast", {"city": mode})
                assert result.structured_content == {"city": mode, "temperature_c": 19.5}
                assert_notarized(rig, result, "weather.forecast", {"city": mode})
                denied = await client.call_tool("admin.delete", {"what": mode})
                assert_refused(denied, codes.AUTHORIZATION_DENIED)
    finally:
        proc.terminate()
        await proc.wait()
    assert [c["arguments"] for c in rig.calls()] == [{"city": "auto"}, {"city": "legacy"}]


# In front of a server that notarizes its own results ------------------------------------------

EXAMPLE_POLICY = REPO / "examples" / "gateway-policy.toml"


async def test_example_policy_and_upstream_receipts_kept(rig: Rig, mode: str) -> None:
    """The example server behind the example policy: its own receipts survive the gateway."""
    upstream = StdioServerParameters(
        command=sys.executable, args=[str(REPO / "examples" / "notarized_server.py")],
        cwd=str(REPO), env={"NOTARY_URL": rig.url, "NOTARY_API_KEY": rig.key,
                            "PYTHONPATH": str(REPO)})
    config = GatewayConfig(upstream=upstream, policy_path=EXAMPLE_POLICY, salt_path=rig.salt,
                           state_path=rig.state, notary_url=rig.url, api_key=rig.key)
    allowed = {"add": {"a": 2, "b": 40}, "forecast": {"city": "Lisbon", "days": 2},
               "echo": {"text": "héllo ☃", "tags": ["a", "b"]}, "server_time": None}
    denied = {"divide": {"a": 1, "b": 0}, "check_stock": {"sku": "nope"},
              "add": {"a": 2, "b": 4000}, "forecast": {"city": "lisbon; rm -rf"}}
    async with Client(build_gateway(config), mode=mode) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert listed == {"add", "forecast", "divide", "check_stock", "echo", "server_time"}
        for tool, arguments in allowed.items():
            request_meta = key_meta(f"echo-{mode}") if tool == "echo" else None
            result = await client.call_tool(tool, arguments, meta=request_meta)
            assert not result.is_error, (tool, result)
            # The gateway's own notarization of what the client received ...
            verdict = verify_tool_result(tool, arguments, result, jwks=rig.jwks,
                                         log_verifier=rig.log_key, server="example-gateway")
            assert verdict.valid, (tool, verdict.to_json())
            # ... and the upstream's, kept under its own key instead of replaced.
            meta = result.meta or {}
            upstream_block = meta[codes.UPSTREAM_TOOL_CALL_META_KEY]
            assert upstream_block["receipt"]["server"] == "notarized-example"
            assert upstream_block["id"] != meta[TOOL_CALL_META_KEY]["id"]
            record = {"server": "notarized-example", "tool": tool,
                      "arguments": arguments or {},
                      "result": hashed_result(received_wire(result)),
                      "salt": upstream_block["salt"]}
            upstream_verdict = verify_receipt(upstream_block["receipt"], record=record,
                                              jwks=rig.jwks, log_verifier=rig.log_key)
            assert upstream_verdict.valid, (tool, upstream_verdict.to_json())
        for tool, arguments in denied.items():
            result = await client.call_tool(tool, arguments)
            assert_refused(result, codes.AUTHORIZATION_DENIED)


# Over stdio: every line gets an answer ------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_stdio_gateway_answers_batches_and_deep_nesting(rig: Rig) -> None:
    """A batch, garbage, or arguments nested 300 deep get a JSON-RPC error, never silence."""
    with open(rig.tmp / "gateway.err", "wb") as errlog:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *gateway_command(rig), cwd=str(REPO),
            env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=errlog, limit=1 << 24)
    assert proc.stdin is not None and proc.stdout is not None

    async def send(obj: Any) -> None:
        text = obj if isinstance(obj, str) else json.dumps(obj)
        proc.stdin.write(text.encode() + b"\n")  # type: ignore[union-attr]
        await proc.stdin.drain()  # type: ignore[union-attr]

    async def answer() -> Any:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)  # type: ignore[union-attr]
        assert line, (rig.tmp / "gateway.err").read_text()
        return json.loads(line)

    def request(rid: int, method: str, params: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            out["params"] = params
        return out

    try:
        await send(request(0, "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}))
        assert (await answer())["id"] == 0
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})

        await send([request(1, "ping"), request(2, "tools/list"),
                    {"jsonrpc": "2.0", "method": "notifications/progress"}])
        batch = await answer()
        assert isinstance(batch, list) and [e["id"] for e in batch] == [1, 2]
        assert {e["error"]["code"] for e in batch} == {-32600}
        await send([])
        assert (await answer())["error"]["code"] == -32600

        await send("this is not JSON")
        garbage = await answer()
        assert garbage["id"] is None and garbage["error"]["code"] == -32700

        deep = request(3, "tools/call", {"name": "echo", "arguments": _nested(300)})
        await send(deep)
        refused = await answer()
        assert refused["id"] == 3 and refused["error"]["code"] == -32602
        assert "deeper than" in refused["error"]["message"]

        await send("[" * 100_000 + "]" * 100_000)  # past Python's own recursion limit
        assert (await answer())["error"]["code"] == -32700

        await send(request(4, "tools/call", "not an object"))
        invalid = await answer()
        assert invalid["id"] == 4 and invalid["error"]["code"] == -32600

        # Still serving: a real call with arguments nested deep, but within bounds.
        await send(request(5, "tools/call", {"name": "echo",
                                             "arguments": {"text": "ok", "x": _nested(150)}}))
        result = await answer()
        assert result["id"] == 5 and result["result"]["content"][0]["text"] == "ok", result
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    assert [c["tool"] for c in rig.calls()] == ["echo"]


def test_screen_line_decides_from_the_line_alone() -> None:
    from notary.gateway.stdio import MAX_DEPTH, screen_line

    ok, answer = screen_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    assert ok is not None and answer is None
    assert screen_line("   \n") == (None, None)
    for line, rid, code in [
        ("{", None, -32700),
        (b"\xff\xfe", None, -32700),
        (json.dumps({"jsonrpc": "2.0", "id": "a", "method": "x",
                     "params": _nested(MAX_DEPTH + 1)}), "a", -32602),
        (json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": 3}), 9,
         -32600),
        (json.dumps({"jsonrpc": "2.0", "id": True, "method": "ping"}), None, -32600),
    ]:
        message, text = screen_line(line)
        assert message is None and text is not None, line
        error = json.loads(text)
        assert (error["id"], error["error"]["code"]) == (rid, code), (line, error)
    # A notification that fails the screen is dropped: JSON-RPC never answers one.
    deep_note = {"jsonrpc": "2.0", "method": "notifications/x", "params": _nested(MAX_DEPTH + 1)}
    assert screen_line(json.dumps(deep_note)) == (None, None)
    # Within the bound, deep arguments are passed on (validated from the parsed value).
    message, _ = screen_line(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                         "params": {"name": "t",
                                                    "arguments": _nested(MAX_DEPTH - 5)}}))
    assert message is not None


async def test_non_object_structured_content_in_both_protocol_modes(rig: Rig, mode: str) -> None:
    """An upstream on MCP 2026-07-28 returns an array (with an array output schema): a
    2026-07-28 client gets the array and verifies it. A 2025-era client gets its own upstream
    session in its own era (so that the upstream's requests to it can be relayed), where this
    upstream cannot express the tool: the client gets the upstream's own error, as it would
    without the gateway."""
    from mcp.server import Server
    from mcp_types import ListToolsResult, TextContent, Tool

    schema = {"type": "array", "items": {"type": "integer"}}

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="numbers", input_schema={"type": "object"},
                                           output_schema=schema)])

    async def call_tool(ctx: Any, params: Any) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="3 numbers")],
                              structured_content=[3, 1, 2])

    upstream: Server[Any] = Server("arrays", on_list_tools=list_tools, on_call_tool=call_tool)
    rig.policy.write_text("version = 1\n[gateway]\nname = \"test-gateway\"\n[tools.numbers]\n")
    config = GatewayConfig(upstream=upstream, policy_path=rig.policy, salt_path=rig.salt,
                           state_path=rig.state, notary_url=rig.url, api_key=rig.key)
    async with Client(build_gateway(config), mode=mode) as client:
        if mode == "legacy":
            with pytest.raises(MCPError) as info:
                await client.list_tools()
            assert info.value.error.code == INTERNAL_ERROR  # the upstream's, passed through
            return
        listed = (await client.list_tools()).tools[0]
        result = await client.call_tool("numbers", {})  # validated against the listed schema
    assert result.structured_content == [3, 1, 2]
    assert listed.output_schema == schema
    assert_notarized(rig, result, "numbers", {})
