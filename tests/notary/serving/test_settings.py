"""Every setting is validated at start, naming the setting and where the value came from."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from notary.serving.config import ConfigError, Settings, resolve

REPO = Path(__file__).resolve().parents[3]

#: At least one bad value per setting (as it would arrive from the environment): a setting
#: without an entry fails test_every_setting_has_a_bad_value_refused.
BAD: dict[str, list[str]] = {
    "data": ["a\0b"],
    "database": ["mysql://h/db", "sqlite:", "postgresql://u:s3cret@h:port/db",
                 "postgresql://u:s3cret@h"],
    "witness_policy": ["/nonexistent/witnesses.policy"],
    "listen": ["nonsense", "127.0.0.1:70000"],
    "public_url": ["ftp://x", "http://", "http://h/p?q=1", "not a url"],
    "origin": ["has space", "a+b"],
    "max_body": ["0", "-5", "1.5", "abc", "1000000000"],
    "max_batch": ["0", "-1"],
    "log_format": ["bogus"],
    "log_level": ["loud"],
    "witnesses": ["http://127.0.0.1:1=nonsense"],
    "mirrors": ["http://127.0.0.1:1=nonsense", "ftp://x"],
    "witness_quorum": ["-3", "2"],  # 2 with no witnesses
    "witness_interval": ["0", "-1", "nan", "inf"],
    "witness_timeout": ["0", "abc"],
    "witness_refresh": ["0", "-1", "nan", "86401"],
    "max_connections": ["-1", "2000000"],
    "keepalive_timeout": ["0", "-1", "nan"],
    "header_timeout": ["0", "inf"],
    "body_timeout": ["0", "-2"],
    "verify_workers": ["0", "-1", "1000"],
    "verify_queue": ["-1"],
    "verify_per_client": ["0"],
    "verify_budget": ["0", "-1", "nan"],
    "scrub_rate": ["-1", "nan", "1000000"],
    "workers": ["0", "-1", "1000", "1.5"],
    "publish": ["out\0dir"],
    "fast_path": ["yes", "true"],
    "pq_checkpoints": ["yes", "ML-DSA"],
    "cose_receipts": ["yes", "COSE"],
    "log_period": ["6", "0h", "5mo", "1 d", "never", "101y"],
    "log_retention": ["2", "-1d", "2Y", "on"],
}


def test_every_setting_has_a_bad_value_refused() -> None:
    assert set(BAD) == {f.name for f in fields(Settings)}
    for name, values in BAD.items():
        env_name = "NOTARY_" + name.upper()
        for value in values:
            with pytest.raises(ConfigError) as info:
                resolve({}, env={env_name: value})
            message = str(info.value)
            shown = "postgresql://…" if value.startswith("postgresql://") else value
            assert message.startswith(f"{env_name}={shown}:"), message
            assert "s3cret" not in message
            assert name in message


def test_errors_name_the_flag_or_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--max-body 0: max_body must be between 1024"):
        resolve({"max_body": 0}, env={})
    with pytest.raises(ConfigError, match=r"^--max-body -5: "):
        resolve({"max_body": -5}, env={})
    toml = tmp_path / "notary.toml"
    for text, shown in (("max_body = true\n", "max_body = True"),
                        ("max_body = 2048.5\n", "max_body = 2048.5"),
                        ('log_format = "bogus"\n', "log_format = 'bogus'"),
                        ("witness_quorum = -3\n", "witness_quorum = -3"),
                        ('witnesses = "one"\n', "witnesses = 'one'")):
        toml.write_text(text)
        with pytest.raises(ConfigError) as info:
            resolve({}, env={}, config_file=toml)
        assert str(info.value).startswith(f"{toml}: {shown}:"), str(info.value)


def test_settings_built_directly_are_validated_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_body"):
        Settings(data=tmp_path, max_body=0)
    with pytest.raises(ConfigError, match="verify_workers"):
        Settings(data=tmp_path, verify_workers=0)
    assert Settings(data=tmp_path).max_body == 64 * 1024


def test_good_values_pass(tmp_path: Path) -> None:
    s = resolve({"max_body": 2048, "header_timeout": 2.5}, env={
        "NOTARY_LOG_FORMAT": "json", "NOTARY_VERIFY_WORKERS": "2", "NOTARY_MAX_CONNECTIONS": "0",
        "NOTARY_PUBLIC_URL": "https://notary.example/base", "NOTARY_ORIGIN": "notary.example/log",
    })
    assert (s.max_body, s.header_timeout, s.log_format, s.verify_workers) == (2048, 2.5, "json", 2)


@pytest.mark.parametrize(("argv", "env", "shown"), [
    (["--max-body", "0"], {}, "--max-body 0: max_body must be between"),
    (["--max-body", "-5"], {}, "--max-body -5: max_body must be between"),
    ([], {"NOTARY_LOG_FORMAT": "bogus"}, "NOTARY_LOG_FORMAT=bogus: log_format must be one of"),
    ([], {"NOTARY_WITNESS_QUORUM": "-3"}, "NOTARY_WITNESS_QUORUM=-3: witness_quorum must be"),
    (["--header-timeout", "0"], {}, "--header-timeout 0.0: header_timeout must be between"),
    (["--max-connections", "900000"], {}, "max_connections 900000 needs more file descriptors"),
])
def test_serve_refuses_bad_settings_at_start(tmp_path: Path, argv: list[str],
                                             env: dict[str, str], shown: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("NOTARY_")}

    def nofile_1024() -> None:  # so that a too-high --max-connections is too high anywhere
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    res = subprocess.run(
        [sys.executable, "-m", "notary.cli.main", "serve", "--data", str(tmp_path / "d"),
         "--listen", "127.0.0.1:0", *argv], capture_output=True, text=True, timeout=60,
        env={**base, "PYTHONPATH": str(REPO), **env}, stdin=subprocess.DEVNULL,
        preexec_fn=nofile_1024)
    assert res.returncode == 2, res.stderr
    assert shown in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
