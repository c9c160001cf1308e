"""``notary gateway`` that cannot start: one line, a non-zero exit, nothing notarized.

The real command runs as a child process (stdio and ``--http``) against a notary served on
loopback (the ``rig`` fixture, ``tests/gateway_rig.py``), once with an upstream command that
does not exist and once with a notary nobody listens on.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from ledger.process.exitcodes import ExitCode
from tests.gateway_rig import Rig
from tests.notary_server import REPO_ROOT, closed_url, free_port


def run_gateway(rig: Rig, upstream: str, notary: str, transport: str) -> tuple[int, str]:
    (rig.tmp / "key").write_text(rig.key)
    argv = [sys.executable, "-m", "notary.cli.main", "gateway", "--upstream", upstream,
            "--policy", str(rig.policy), "--salt-file", str(rig.salt),
            "--state", str(rig.state), "--notary", notary,
            "--api-key-file", str(rig.tmp / "key")]
    if transport == "http":
        argv += ["--http", f"127.0.0.1:{free_port()}"]
    done = subprocess.run(argv, cwd=str(REPO_ROOT), env={**os.environ,
                                                         "PYTHONPATH": str(REPO_ROOT)},
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_missing_upstream_command_is_one_line_and_notarizes_nothing(
        rig: Rig, transport: str) -> None:
    before = await rig.size()
    code, err = await asyncio.to_thread(run_gateway, rig, str(rig.tmp / "no-such-server"),
                                        rig.url, transport)
    assert code == ExitCode.UNREACHABLE, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("notary gateway: error: the upstream command"), err
    assert "fix --upstream" in err and "Traceback" not in err
    assert await rig.size() == before  # the policy commitment was not notarized


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_unreachable_notary_is_one_line(rig: Rig, transport: str) -> None:
    upstream = f"{sys.executable} -m tests.gateway_upstream --log {rig.log}"
    code, err = await asyncio.to_thread(run_gateway, rig, upstream, closed_url(), transport)
    assert code == ExitCode.UNREACHABLE, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("notary gateway: error: the notary did not answer"), err
    assert "--notary" in err and "Traceback" not in err
    assert not rig.calls()
