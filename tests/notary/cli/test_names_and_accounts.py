"""End to end against a real ``notary serve`` on loopback, with the operator's commands run
beside it: server names belong to accounts (``notary names``), a digest to the account that
logged it, and an account's allowance changes only with ``notary account set-allowance``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ledger.process.exitcodes import ExitCode
from notary.operator import admin
from notary.serving.service import Account
from tests.notary_server import NotaryProcess, headless_notary, issue, run_cli

FULL_WIDTH_WEATHER = "\uff57eather"  # ｗ: FULLWIDTH LATIN SMALL LETTER W


def _issue(server: NotaryProcess, key: str, name: str, n: int) -> tuple[int, dict[str, object]]:
    body = {"server": name, "tool": "t", "call_sha256": hashlib.sha256(b"%d" % n).hexdigest()}
    r = server.post("/v1/tool-calls", json_body=body, api_key=key)
    return r.status, r.json()


def run_suggested(server: NotaryProcess, refused: str) -> None:
    """Run the command a refusal suggests (its last `...`), as printed."""
    program, *words = shlex.split(refused.rsplit("`", 2)[-2])
    assert program == "notary" and "--data" in words, refused
    server.cli(*words)


def _names(server: NotaryProcess) -> list[tuple[str, str]]:
    out = server.cli("names", "list", "--json", "--data", str(server.data_dir)).stdout
    return [(r["name"], r["account"]) for r in json.loads(out)]


def test_names_belong_to_accounts_over_http(notary_server: NotaryProcess) -> None:
    server = notary_server
    alice = server.create_api_key("alice")
    alice2 = server.create_api_key("alice")
    bob = server.create_api_key("bob")
    status, receipt = _issue(server, alice, "weather", 1)
    assert status == 201
    for name in ("weather", FULL_WIDTH_WEATHER, "WEATHER"):
        status, err = _issue(server, bob, name, 2)
        assert (status, err["error"]["code"]) == (403, "server_not_allowed")  # type: ignore[index]
    assert _issue(server, alice2, "weather", 3)[0] == 201  # every key of the account
    assert _issue(server, bob, "forecast", 4)[0] == 201  # a free name
    # Alice's digest is not Bob's receipt, whatever server name he gives.
    for name in ("weather", "forecast"):
        status, err = _issue(server, bob, name, 1)
        assert (status, err["error"]["code"]) == (409, "digest_taken")  # type: ignore[index]
    assert server.get("/healthz").json()["size"] == 3
    # The holding account is shown nowhere public: not in receipts, searches or the explorer.
    public = [json.dumps(receipt), server.get("/v1/tool-calls?server=weather").text,
              server.get(f"/v1/tool-calls/{receipt['id']}").text,
              server.get("/explorer/servers/weather").text]
    # (as a word: inside base64 of a signature or an id, "bob" turns up by chance)
    leaked = re.compile(r"(?<![A-Za-z0-9_+/-])(alice|bob)(?![A-Za-z0-9_+/-])")
    assert not any(leaked.search(text) for text in public)

    assert _names(server) == [("forecast", "bob"), ("weather", "alice")]
    server.cli("names", "grant", "news", "--account", "bob", "--data", str(server.data_dir))
    assert _issue(server, alice, "news", 5)[0] == 403
    taken = server.cli("names", "grant", "NEWS", "--account", "alice", "--data",
                       str(server.data_dir), check=False)
    assert taken.returncode == ExitCode.USAGE and "move" in taken.stderr
    held = server.cli("names", "grant", "news", "--account", "alice", "--data",
                      str(server.data_dir), check=False)
    run_suggested(server, held.stderr)
    assert ("news", "alice") in _names(server)
    server.cli("names", "move", "news", "--to", "bob", "--data", str(server.data_dir))
    server.cli("names", "move", "weather", "--to", "bob", "--data", str(server.data_dir))
    assert _issue(server, bob, "weather", 6)[0] == 201
    assert _issue(server, alice, "weather", 7)[0] == 403
    missing = server.cli("names", "move", "nothing", "--to", "bob", "--data",
                         str(server.data_dir), check=False)
    assert missing.returncode == ExitCode.USAGE and "no account holds" in missing.stderr
    assert [n for n, a in _names(server) if a == "bob"] == ["forecast", "news", "weather"]


def _allowances(server: NotaryProcess) -> dict[str, object]:
    out = server.cli("apikey", "list", "--json", "--data", str(server.data_dir)).stdout
    return {k["key_id"]: k["monthly_allowance"] for k in json.loads(out)}


def test_a_new_key_never_changes_the_accounts_allowance(notary_server: NotaryProcess) -> None:
    server = notary_server
    data = str(server.data_dir)
    first = server.create_api_key("alice", monthly_allowance=1)
    assert _issue(server, first, "srv", 1)[0] == 201
    assert _issue(server, first, "srv", 2)[0] == 429
    refused = server.cli("apikey", "create", "--data", data, "--account", "alice",
                         "--monthly-allowance", "1000", check=False)
    assert refused.returncode == ExitCode.USAGE
    assert "set-allowance" in refused.stderr and "nk_" not in refused.stdout
    assert set(_allowances(server).values()) == {1} and len(_allowances(server)) == 1
    assert _issue(server, first, "srv", 2)[0] == 429  # nothing changed
    run_suggested(server, refused.stderr)  # what was meant: the account's allowance
    assert set(_allowances(server).values()) == {1000}
    server.cli("account", "set-allowance", "alice", "1", "--data", data)
    server.create_api_key("alice", monthly_allowance=1)  # the account's own: fine
    server.create_api_key("alice")  # none given: the account's
    assert set(_allowances(server).values()) == {1}

    server.cli("account", "set-allowance", "alice", "3", "--data", data)
    assert set(_allowances(server).values()) == {3}
    assert _issue(server, first, "srv", 2)[0] == 201  # at once, for every key
    server.cli("account", "set-allowance", "alice", "unlimited", "--data", data)
    assert set(_allowances(server).values()) == {None}
    for argv in (["nobody", "3"], ["alice", "-1"], ["alice", "many"]):
        bad = server.cli("account", "set-allowance", *argv, "--data", data, check=False)
        assert bad.returncode == ExitCode.USAGE, bad
        if argv[0] == "nobody":  # an account is made with its first key, as suggested
            run_suggested(server, bad.stderr)
            assert "nobody" in server.cli("apikey", "list", "--data", data).stdout


def test_two_accounts_racing_through_workers_for_a_free_name(tmp_path: Path) -> None:
    """``--workers 2`` on one SQLite log: two accounts ask, many times at once on separate
    connections (the kernel spreads them over both workers), for one free name and a
    look-alike. Exactly one account gets receipts; every request of the other is a 403."""
    with NotaryProcess(tmp_path / "data", args=("--workers", "2")) as server:
        keys = {"alice": server.create_api_key("alice"), "bob": server.create_api_key("bob")}

        def ask(n: int) -> tuple[str, int]:
            account = "alice" if n % 2 else "bob"
            name = "race" if n % 4 < 2 else "RACE"
            return account, _issue(server, keys[account], name, 1000 + n)[0]

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(ask, range(64)))
        won = {account for account, status in answers if status == 201}
        assert len(won) == 1, answers
        assert all(status == 201 if account in won else status == 403
                   for account, status in answers), answers
        assert server.get("/healthz").json()["size"] == 32
        assert {a for _, a in _names(server)} == won


def test_names_with_blanks_or_mixed_scripts_are_refused_over_http(
        notary_server: NotaryProcess) -> None:
    """Alice holds ``weather`` and ``my server``; Bob's keys are refused every name that
    would read the same, with a 400 that says why (or a 403 for a plain look-alike), and
    nothing is logged for him."""
    server = notary_server
    alice, bob = server.create_api_key("alice"), server.create_api_key("bob")
    assert _issue(server, alice, "weather", 1)[0] == 201
    assert _issue(server, alice, "my server", 2)[0] == 201
    refused = {
        "weather ": "begin or end with a space", " weather": "begin or end with a space",
        "my server ": "begin or end with a space", "my  server": "two spaces in a row",
        "weather\u2800": "U+2800 BRAILLE PATTERN BLANK", "\u2800weather": "U+2800",
        "wea\u3164ther": "U+3164 HANGUL FILLER", "\u115fweather": "U+115F",
        "weather\u1160": "U+1160", "\uffa0weather": "U+FFA0", "we\u034father": "U+034F",
        "w\u0435ather": "mixes scripts", "my s\u0435rver": "mixes scripts",
    }
    for n, (name, why) in enumerate(refused.items()):
        status, err = _issue(server, bob, name, 10 + n)
        assert status == 400, (name, err)
        assert err["error"]["code"] == "invalid_name", err  # type: ignore[index]
        assert why in err["error"]["message"], err  # type: ignore[index]
    # Names legitimately in use keep working.
    for n, name in enumerate(["mcp-\u043f\u043e\u0433\u043e\u0434\u0430",
                              "\u5929\u6c17", "caf\u00e9", "srv.example/a_b:1"]):
        assert _issue(server, bob, name, 100 + n)[0] == 201, name
    assert server.get("/healthz").json()["size"] == 6


async def test_names_list_never_prints_two_names_the_same(tmp_path: Path) -> None:
    """A store from before the rules holds names that read alike (``weather`` and
    ``weather ``, a Cyrillic look-alike, a braille blank): ``names list`` tells them apart."""
    data = tmp_path / "d"
    alike = ["weather", "weather ", "w\u0435ather", "weather\u2800", "my server",
             "my  server", "\u043f\u043e\u0433\u043e\u0434\u0430"]
    async with headless_notary(data, "sqlite") as notary:
        await admin.create_api_key(notary.store, "bob")
        for n, name in enumerate(alike):  # through the service: the HTTP route refuses them
            await issue(notary, n, Account("alice", None), server=name)
        await admin.move_server_name(notary.store, "weather ", "bob")
    code, out = run_cli("names", "list", "--data", str(data))
    assert code == 0, out
    rows = out.splitlines()[1:]
    shown = [row[:40].rstrip() for row in rows]
    assert len(rows) == len(alike) and len(set(shown)) == len(alike), out
    assert all(row.isascii() for row in rows), out
    assert '"weather "' in shown and "weather" in shown and '"w\\u0435ather"' in shown
    code, out = run_cli("names", "list", "--data", str(data), "--json")
    assert code == 0 and out.isascii()
    assert {r["name"] for r in json.loads(out)} == set(alike)
