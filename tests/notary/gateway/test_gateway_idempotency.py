"""A non-idempotent call whose gateway is killed (kill -9) while the call is upstream.

The key was claimed ``pending``, durably and with its decision's evidence, before anything was
forwarded; the outcome was never recorded. A retry under the same key, through another
gateway process on the same state file, gets ``gateway.IDEMPOTENCY_OUTCOME_UNKNOWN``: the
upstream never runs the call a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from typing import Any, cast

from mcp import Client
from mcp_types import RequestParamsMeta

from notary.gateway import build_gateway, codes
from notary.gateway.store import read_decisions
from tests.gateway_rig import Rig, spawn, stop
from tests.gateway_upstream import HOLD
from tests.notary_server import REPO_ROOT, free_port
from tests.waiting import until

HELD = {"amount": 2750, "recipient": "client-settlement-account", "memo": HOLD,
        "approval": {"approved": True}}
META = cast(RequestParamsMeta, {codes.AGENT_META_KEY: "LegalAgent",
                                codes.IDEMPOTENCY_META_KEY: "K-killed"})


async def test_a_gateway_killed_mid_call_never_runs_it_twice(rig: Rig) -> None:
    (rig.tmp / "key").write_text(rig.key)
    port = free_port()
    proc = await asyncio.to_thread(spawn, [
        "-m", "notary.cli.main", "gateway", "--upstream", shlex.join(rig.upstream_command()),
        "--upstream-cwd", str(REPO_ROOT), "--upstream-env", f"PYTHONPATH={REPO_ROOT}",
        "--policy", str(rig.policy), "--salt-file", str(rig.salt), "--state", str(rig.state),
        "--notary", rig.url, "--api-key-file", str(rig.tmp / "key"),
        "--http", f"127.0.0.1:{port}"], port, rig.tmp / "gateway.log")
    try:
        # The client fails one way or another once its server is gone.
        with contextlib.suppress(Exception):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                call = asyncio.create_task(
                    client.call_tool("payments.transfer", HELD, meta=META))
                await until(lambda: len(rig.calls("payments.transfer")) == 1,
                            "the call to reach the upstream")
                proc.kill()  # kill -9, the call upstream, its outcome unrecorded
                await call
        assert len(rig.calls("payments.transfer")) == 1
    finally:
        proc.kill()
        await asyncio.to_thread(stop, proc)

    # The decision that authorized the call was saved with the claim.
    decisions: list[Any] = [e.record async for e in read_decisions(rig.state)]
    assert [(d["tool"], d["decision"]) for d in decisions] == [("payments.transfer", "allow")]
    async with Client(build_gateway(rig.config()), mode="auto") as client:
        again = await client.call_tool("payments.transfer", HELD, meta=META)
    assert again.is_error
    assert (again.meta or {})[codes.AUTH_ERROR_META_KEY] == {
        "code": codes.IDEMPOTENCY_OUTCOME_UNKNOWN}
    assert len(rig.calls("payments.transfer")) == 1  # never executed a second time
