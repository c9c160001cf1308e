"""The verifier as the tests run it on notarized calls, and its report read back.

:func:`verify` runs the library (``notary.verifier``) online or offline; :func:`statuses` and
:func:`failed_levels` read the levels of its report, :func:`json_out` the report that
``notary verify --json`` printed. Calls come from :class:`tests.notary_server.LiveNotary`.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.client.http import HttpClient
from notary.verifier.inputs import ToolCall, call_from_document
from notary.verifier.report import Report
from notary.verifier.state import StateFile
from notary.verifier.trust import Trust
from notary.verifier.verify import verify_tool_call
from tests.notary_server import Call

__all__ = ["failed_levels", "json_out", "saved", "statuses", "verify"]


async def verify(call: ToolCall, trust: Trust, state: StateFile | None = None,
                 online: bool = True, log_url: str | None = None) -> Report:
    if not online:
        return await verify_tool_call(call, trust, fetcher=None, state=state, log_url=log_url)
    async with HttpClient(timeout=5.0) as fetcher:
        return await verify_tool_call(call, trust, fetcher=fetcher, state=state, log_url=log_url)


def saved(call: Call, receipt: dict[str, Any] | None = None) -> ToolCall:
    """The call as a client saved it (with another receipt, when given)."""
    return call_from_document(call.saved, receipt=receipt)


def statuses(report: Report | dict[str, Any]) -> dict[str, str]:
    doc: dict[str, Any] = report.to_json() if isinstance(report, Report) else report
    return {name: level["status"] for name, level in doc["levels"].items()}


def failed_levels(report: Report) -> set[str]:
    return {n for n, s in statuses(report).items() if s == "failed"}


def json_out(out: str) -> Any:
    """The JSON report in captured stdout (the in-process notary logs to stdout too)."""
    start = out.index("{\n") if out.startswith("{\n") else out.index("\n{\n") + 1
    end = out.index("\n}\n", start) + 2
    return json.loads(out[start:end])
