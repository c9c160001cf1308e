"""The operator's starting points in examples/: ``notary.toml`` is a settings file ``notary
serve`` accepts (witnesses, mirrors, publishing, limits), and ``notary.service`` a hardened
systemd unit that ``systemd-analyze`` verifies and rates, running that file where it puts it."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from notary.http.app import create_app
from notary.http.witnessing import witness_policy
from notary.serving.config import resolve

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "notary.toml"
UNIT = REPO / "examples" / "notary.service"


def test_the_example_config_is_accepted_with_witnesses_mirrors_publishing_and_limits(
        tmp_path: Path) -> None:
    keys = set(tomllib.loads(CONFIG.read_text()))
    for group in ({"witnesses", "mirrors", "witness_quorum", "witness_refresh"}, {"publish"},
                  {"max_body", "max_connections", "header_timeout", "body_timeout",
                   "verify_budget"}):
        assert group <= keys, f"examples/notary.toml does not show {sorted(group - keys)}"
    settings = resolve({}, env={}, config_file=CONFIG)  # every key known, every value valid
    quorum, endpoints = witness_policy(settings)
    assert (quorum, sum(e.mirror for e in endpoints)) == (2, 1)
    # The application is built from it (witness settings are checked then); only the paths
    # move to this test's directory. Nothing is started: the witnesses are not on loopback.
    create_app(dataclasses.replace(settings, data=tmp_path / "data",
                                   publish=str(tmp_path / "tiles")))
    assert settings.workers > 1 and settings.log_format == "json"


def _directives(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line)
        if m:
            found.setdefault(m.group(1), []).append(m.group(2))
    return found


def test_the_unit_runs_the_example_config_where_it_puts_things() -> None:
    unit = _directives(UNIT.read_text())
    settings = resolve({}, env={}, config_file=CONFIG)
    assert unit["User"] == ["notary"] and unit["StateDirectory"] == ["notary"]
    assert settings.data == Path("/var/lib/notary")  # systemd's StateDirectory=notary
    assert unit["ReadWritePaths"] == [settings.publish]
    assert re.search(r"\bserve --config /etc/notary/notary\.toml$", unit["ExecStart"][0])
    for name, value in (("ProtectSystem", "strict"), ("NoNewPrivileges", "yes"),
                        ("PrivateTmp", "yes"), ("ProtectHome", "yes"), ("UMask", "0077")):
        assert unit.get(name) == [value], name


def test_systemd_analyze_verifies_the_unit_and_rates_it_ok(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.fail("systemd-analyze is not installed: install Debian's 'systemd' package "
                    "(./scripts/test does, as root) to check examples/notary.service")
    # The unit names the notary where the install notes put it; verify checks that the
    # program exists, so point it at this environment's.
    notary = Path(sys.executable).parent / "notary"
    assert notary.exists(), notary
    unit = tmp_path / "notary.service"
    unit.write_text(UNIT.read_text().replace("/opt/notary/bin/notary", str(notary)))
    done = subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stderr
    # Exposure 0 (locked down) to 10 (unprotected): "OK" is below 2.
    done = subprocess.run([tool, "security", "--offline=true", "--threshold=19", str(unit)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    level = re.search(r"Overall exposure level for notary\.service: ([0-9.]+)", done.stdout)
    assert level and float(level.group(1)) < 2.0, done.stdout[-500:]
