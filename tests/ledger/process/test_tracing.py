"""ledger.process.tracing: OTLP export when, and only when, the OTEL_* variables ask; with none
set, nothing of OpenTelemetry is loaded and the hot paths are the untraced ones."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ledger.process.tracing import wanted
from tests.notary_server import REPO_ROOT
from tests.otlp_receiver import otlp_receiver
from tests.waiting import wait_until


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, False),
    ({"OTEL_SERVICE_NAME": "x", "OTEL_RESOURCE_ATTRIBUTES": "a=b"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ({"OTEL_TRACES_EXPORTER": "console"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"}, False),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, False),
    ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, True),
])
def test_only_the_standard_variables_turn_export_on(environ: dict[str, str],
                                                    expected: bool) -> None:
    assert wanted(environ) is expected


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT,
                          env={**base, "PYTHONPATH": str(REPO_ROOT), **env})


OFF = """
import sys
from aiohttp import web
from ledger.process import tracing
from ledger.http.tracing import middlewares
from notary.http.routes.tool_calls import plain_issue
import notary.cli.serve, notary.http.app, notary.serving.service
assert tracing.setup("notary") is False and tracing.TRACER is None
assert middlewares() == []
assert plain_issue(web.Application()).__name__ == "handle"
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert not loaded, loaded
"""


def test_with_no_otel_variable_nothing_is_loaded_and_the_hot_path_is_untraced() -> None:
    done = _python(OFF, {})
    assert done.returncode == 0, done.stderr


ON = """
import sys
from ledger.process import tracing
assert tracing.setup("default-name") is True
with tracing.TRACER.start_as_current_span("probe"):
    pass
from aiohttp import web
from notary.http.routes.tool_calls import plain_issue
assert plain_issue(web.Application()).__name__ == "traced"
"""


def test_spans_go_to_the_otlp_endpoint_under_the_standard_service_name() -> None:
    with otlp_receiver() as receiver:
        done = _python(ON, receiver.env())
        assert done.returncode == 0, done.stderr
        named = _python(ON, {**receiver.env(), "OTEL_SERVICE_NAME": "chosen"})
        assert named.returncode == 0, named.stderr
        wait_until(lambda: len(receiver.received()) == 2, "both probes")
        assert sorted((s.service, s.name) for s in receiver.received()) == [
            ("chosen", "probe"), ("default-name", "probe")]


def test_an_unsupported_protocol_says_so_and_runs_untraced() -> None:
    done = _python("from ledger.process import tracing\n"
                   "assert tracing.setup('x') is False and tracing.TRACER is None",
                   {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    assert done.returncode == 0, done.stderr
    assert "tracing is off" in done.stderr and "http/json" in done.stderr
