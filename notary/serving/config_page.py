"""docs/configuration.md, written from the settings table (``notary.serving.config.SETTINGS``).

The page's synopsis and its tables (flag, environment variable, TOML key, default, meaning) are
the table's rows, so they cannot drift from what ``notary serve`` accepts; the prose between them
is here, one text per group of settings. Regenerate the page with :data:`COMMAND` after changing
a setting; tests/project/test_configuration_page.py fails while the committed page differs.
"""

from __future__ import annotations

import sys

from notary.serving.config import (
    GROUPS,
    LIMITS,
    LOGGING,
    SERVER,
    SETTINGS,
    STORE,
    VERIFY,
    WITNESSES,
    Setting,
)

__all__ = ["COMMAND", "render"]

COMMAND = "python -m notary.serving.config_page > docs/configuration.md"

_WIDTH = 100  # the synopsis' lines, like the rest of docs/

_HEAD = f"""\
# Configuration

_This page is generated from the settings table in
[notary/serving/config.py](../notary/serving/config.py) by
`{COMMAND}`._

Commands are shown as `notary …` and `ledger …`. From a clone they live in `.venv/bin/` (made by
`./scripts/serve` or `./scripts/test`): run them as `.venv/bin/notary …`, or put them on your PATH
for this shell with `export PATH="$PWD/.venv/bin:$PATH"`. After `pip install mcp-notary` they are on
the PATH of the environment you installed into. The command blocks of this page are examples, not
run as written by the tests; the [walkthrough](walkthrough.md)'s are.
"""

_SOURCES = """\
## Where a setting comes from

Each setting comes from the flag, else the environment variable (`NOTARY_` and the setting's
name in capitals: `NOTARY_LISTEN`, `NOTARY_MAX_BODY`, `NOTARY_HEADER_TIMEOUT`, …;
`NOTARY_CONFIG` names the file), else the TOML file (the setting's name as the key, `-` or `_`
between words: `data = "..."`, `listen = "..."`, `witnesses = ["URL=VKEY"]`, …), else the
default; unknown keys in the file are an error. A list (`--witness`, `--mirror`) repeats its
flag, is an array in the file, and in the environment is separated by spaces or commas. Every
value is checked at start (type, range, choice): a bad one stops `notary serve` with exit status
2 and a message naming the setting and where it came from (`--max-body 0: max_body must be
between 1024 and 67108864 bytes`, `NOTARY_LOG_FORMAT=bogus: …`). Every `notary` command that
touches the store takes `--data` (default `./notary-data`), `--database` and `--config`.

A settings file, read by `notary serve --config notary.toml` (or with `NOTARY_CONFIG=notary.toml`
in the environment):

```toml
data = "/var/lib/notary"
listen = "127.0.0.1:9080"
public_url = "https://notary.example"
max-body = 131072
header_timeout = 5.0
log_format = "json"
```
"""

_BEFORE = {
    STORE: """\
`--database` selects the store: empty (the default) is the SQLite file in `--data`; `memory:` is
a throwaway store that lives as long as one `notary serve` process (tests and demos: API keys can
then only be added in process, through `notary.operator.admin`); a `postgresql://` URL is a
database that several frontends share (see [PostgreSQL](postgresql.md)).""",
    LIMITS: """\
`ledger serve` and `notary witness serve` run the same server, with the default connection
limit and timeouts.""",
    WITNESSES: """\
What witnesses, mirrors and their cosignatures prove, and how to run them:
[Witnesses, monitors and mirrors](witnesses.md).""",
}

_AFTER = {
    SERVER: """\
`--public-url` is the base of the `ledger.entry_url` of new receipts (`receipt_url` and
`verify_url` are in the SDK's `_meta` block, not in the receipt). Changing it (or the port, or
the host) changes new receipts only: a stored receipt keeps the `entry_url` it was signed with
and is served exactly as signed. SIGTERM stops accepting requests, commits every pending append
and answers its waiters, then exits.""",
    LIMITS: """\
When descriptors run out anyway, accepting backs off (up to 1 s) and logs one line per 10 s
instead of spinning. A client that disconnects mid-request is counted with status 499 in
`/metrics`, not as a 500.""",
    VERIFY: """\
Verification workers run at a lower CPU priority (nice 10), so notarization wins a contended
CPU; a client that sends again while told to wait gets its 429 without the server reading its
body (its connection is closed). Client addresses are the peer's IP: behind a reverse proxy all
clients share the proxy's, so the proxy should apply per-client limits of its own. With 16
connections verifying a 62 KB record at 100/s, notarization's p50 was 0.75× its idle figure
([verify flood](../benchmarks/docs/verify_flood.md)).""",
    LOGGING: """\
Logs are structlog JSON lines (readable on a terminal). They never contain request bodies,
records, digests or keys, nor any other request byte: a request that fails to parse is logged as
one line naming the error (at most one such line per 10 s), and library messages (aiohttp,
asyncio) pass through the same JSON log with their arguments dropped.""",
}


def _value(row: Setting) -> str:
    """What follows a setting's flag: its metavar, or its choices."""
    return row.metavar or "|".join(row.choices)


def _synopsis() -> str:
    """``notary serve [--data DIR] …``, wrapped; the same flags as ``notary serve --help``."""
    words = [f"[{row.flag} {_value(row)}{' …' if row.repeatable else ''}]"
             for row in SETTINGS if row.flag is not None]
    lines = ["notary serve"]
    for word in [*words, "[--config FILE]"]:
        if len(lines[-1]) + 1 + len(word) > _WIDTH:
            lines.append("   ")
        lines[-1] += " " + word
    return "```text\n" + "\n".join(lines) + "\n```"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _row(row: Setting) -> str:
    flag = f"`{row.flag} {_value(row)}`" if row.flag else "—"
    if row.shown_default:
        default = row.shown_default.replace("<", "\\<")  # not an HTML tag
    elif row.default_text:
        default = f"`{row.default_text}`"
    else:
        default = "none" if row.repeatable else "empty"
    meaning = " ".join(_sentence(t) for t in (row.help, row.detail) if t)
    cells = (f"`{row.name}`", flag, f"`{row.env}`", default, meaning)
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _section(group: str) -> str:
    rows = [_row(row) for row in SETTINGS if row.group == group]
    table = "\n".join(["| TOML key | flag | environment | default | meaning |",
                       "|---|---|---|---|---|", *rows])
    parts = [f"## {group}", _BEFORE.get(group, ""), table, _AFTER.get(group, "")]
    return "\n\n".join(p for p in parts if p)


def render() -> str:
    """The whole page, as committed in docs/configuration.md."""
    unplaced = {row.name for row in SETTINGS if row.group not in GROUPS}
    if unplaced:
        raise ValueError(f"settings in no group of the page: {sorted(unplaced)}")
    parts = [_HEAD, _synopsis(), _SOURCES, *(_section(g) for g in GROUPS)]
    return "\n\n".join(p.rstrip("\n") for p in parts) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
