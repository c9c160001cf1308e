"""HOST:PORT parsing: one helper, one error, a message that names the flag to fix."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer
from ledger.process.exitcodes import UsageError
from ledger.process.netaddr import AddressError, parse_host_port
from notary.cli.main import main as notary_cli


@pytest.mark.parametrize(("text", "want"), [
    ("127.0.0.1:0", ("127.0.0.1", 0)),
    ("localhost:8080", ("localhost", 8080)),
    ("[::1]:65535", ("::1", 65535)),
])
def test_parses_host_and_port(text: str, want: tuple[str, int]) -> None:
    assert parse_host_port(text) == want


@pytest.mark.parametrize("text", ["nonsense", "host:", "host:65536", "host:８０", "host:-1", ":80"])
def test_malformed_is_one_usage_error_naming_the_flag(text: str) -> None:
    with pytest.raises(AddressError) as caught:
        parse_host_port(text, what="--listen")
    assert isinstance(caught.value, UsageError) and isinstance(caught.value, ValueError)
    assert str(caught.value).startswith("--listen must be HOST:PORT")
    assert repr(text) in str(caught.value)


def test_default_host_fills_an_empty_host() -> None:
    assert parse_host_port(":7000", default_host="127.0.0.1") == ("127.0.0.1", 7000)


def _notary(*argv: str) -> tuple[int, str]:
    """``notary ARGV`` in this process: (exit status, standard error)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = notary_cli(list(argv))
    return code, err.getvalue()


def test_commands_report_a_bad_address_with_the_flag(tmp_path: Path) -> None:
    key = tmp_path / "w.key"
    key.write_text(CosignatureSigner.generate("w.test").private_key_text() + "\n")
    key.chmod(0o600)
    vkey = Ed25519Signer.generate("log.test").verifier_key_text()
    code, err = _notary("witness", "serve", "--key", str(key), "--log", vkey,
                        "--listen", "nope", "--data", str(tmp_path / "w"))
    assert (code, err.strip()) == (2, "notary: error: --listen must be HOST:PORT, got 'nope'")
    code, err = _notary("monitor", "--log", "http://127.0.0.1:9", "--vkey", vkey,
                        "--metrics", "nope", "--state", str(tmp_path / "m.json"))
    assert (code, err.strip()) == (2, "notary: error: --metrics must be HOST:PORT, got 'nope'")
    assert not (tmp_path / "m.json").exists()
