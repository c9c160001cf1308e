"""The one place keys become trust anchors (notary.verifier.trust), for every entry point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from nacl.signing import SigningKey

from ledger.client.http import HttpClient
from ledger.core.cosignature import CosignatureSigner
from ledger.core.note import Ed25519Signer, Ed25519Verifier
from ledger.core.tlog_policy import TlogPolicy, parse_tlog_policy
from notary.cli.main import build_parser
from notary.cli.mcp import config_from_args
from notary.cli.trust_args import trust_from_args
from notary.core.ids import b64url_encode
from notary.core.jwks import Jwks
from notary.core.receipts import jwk_thumbprint
from notary.verifier.inputs import VerifierInputError
from notary.verifier.trust import Trust, build_trust, complete_from_notary

NOTARY = "http://127.0.0.1:9"


def _jwks() -> dict[str, Any]:
    x = b64url_encode(bytes(SigningKey.generate().verify_key))
    return {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "kid": jwk_thumbprint(x)}]}


class FakeNotary:
    """Stands in for the HTTP client: serves one notary's JWKS and log key, counting requests."""

    def __init__(self) -> None:
        self.jwks = _jwks()
        self.log = Ed25519Signer.generate("notary.test/log")
        self.urls: list[str] = []

    async def get_bytes(self, url: str) -> bytes:
        self.urls.append(url)
        if url == NOTARY + "/.well-known/jwks.json":
            return json.dumps(self.jwks).encode()
        assert url == NOTARY + "/v1/ledger", url
        return json.dumps({"vkey": self.log.verifier_key_text()}).encode()

    async def get_json(self, url: str) -> Any:
        return json.loads(await self.get_bytes(url))


def _witness(name: str) -> Any:
    return CosignatureSigner.generate(name).verifier()


def test_default_quorum_counts_distinct_witnesses() -> None:
    a, b = _witness("w.test/a"), _witness("w.test/b")
    assert build_trust(None, (), (a, b, a), None).quorum == 2
    assert build_trust(None, (), (), None).quorum == 0
    assert build_trust(None, (), (a, b), 1).quorum == 1


def test_a_quorum_without_witnesses_or_beyond_them_is_refused() -> None:
    with pytest.raises(VerifierInputError, match="needs witness keys"):
        build_trust(None, (), (), 1)
    a = _witness("w.test/a")
    with pytest.raises(VerifierInputError, match="cannot be met"):
        build_trust(None, (), (a, a), 2)


async def test_pinned_keys_are_never_replaced_and_only_gaps_are_fetched() -> None:
    notary = FakeNotary()
    pinned_jwks = Jwks(_jwks())
    pinned_key = Ed25519Verifier.from_vkey(
        Ed25519Signer.generate("other.test/log").verifier_key_text())

    jwks, keys, fetched = await complete_from_notary(pinned_jwks, (pinned_key,), NOTARY, notary)
    assert (jwks, keys, fetched, notary.urls) == (pinned_jwks, (pinned_key,), False, [])

    jwks, keys, fetched = await complete_from_notary(None, (pinned_key,), NOTARY, notary)
    assert fetched and keys == (pinned_key,)
    assert jwks is not None and jwks.kids == [notary.jwks["keys"][0]["kid"]]

    jwks, keys, fetched = await complete_from_notary(pinned_jwks, (), NOTARY, notary)
    assert fetched and jwks is pinned_jwks
    assert [k.key_id for k in keys] == [notary.log.verifier().key_id]


async def test_offline_or_without_a_notary_nothing_is_fetched() -> None:
    notary = FakeNotary()
    assert await complete_from_notary(None, (), NOTARY, None) == (None, (), False)
    assert await complete_from_notary(None, (), None, notary) == (None, (), False)
    assert notary.urls == []


def test_notary_mcp_accepts_a_witness_key_given_twice() -> None:
    """Its default quorum is every distinct witness, as for ``notary verify`` (it used to count
    the flags, so the same key twice asked for a quorum of 2 that one witness cannot meet)."""
    key = CosignatureSigner.generate("w.test/a").verifier_key_text()
    args = build_parser().parse_args(["mcp", "--witness", key, "--witness", key, "--no-state"])
    config = config_from_args(args)
    assert config.quorum is None and len(config.witnesses) == 2


def _policy(*logs: Ed25519Signer) -> TlogPolicy:
    return parse_tlog_policy("".join(f"log {s.verifier_key_text()}\n" for s in logs)
                             + "quorum none\n")


def test_a_policys_log_lines_are_log_keys_of_the_trust() -> None:
    """Every log a policy names (log 0 and log 1 of a notary that rolled) is trusted, after
    the keys given beside it, each once."""
    log0, log1 = (Ed25519Signer.generate(f"notary.test/log/{n}") for n in (0, 1))
    pinned = Ed25519Verifier.from_vkey(log0.verifier_key_text())
    trust = Trust(None, (pinned,), policy=_policy(log0, log1))
    assert [k.vkey for k in trust.log_keys] == [log0.verifier_key_text(),
                                                log1.verifier_key_text()]


async def test_a_policys_log_lines_are_pinned_so_the_notary_only_fills_in_receipt_keys(
        tmp_path: Path) -> None:
    notary = FakeNotary()
    listed = Ed25519Signer.generate("notary.test/log/1")
    path = tmp_path / "logs.policy"
    path.write_text(f"log {listed.verifier_key_text()}\nquorum none\n")
    args = build_parser().parse_args(["verify", "call.json", "--notary", NOTARY,
                                      "--witness-policy", str(path)])
    trust = await trust_from_args(args, cast(HttpClient, notary))
    assert [k.vkey for k in trust.log_keys] == [listed.verifier_key_text()]
    assert trust.jwks is not None and trust.jwks.kids == [notary.jwks["keys"][0]["kid"]]
    # A policy without log lines pins none: the notary's log key fills in, as before.
    path.write_text("quorum none\n")
    trust = await trust_from_args(args, cast(HttpClient, notary))
    assert [k.vkey for k in trust.log_keys] == [notary.log.verifier_key_text()]
