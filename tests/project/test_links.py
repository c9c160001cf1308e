"""A clone needs nothing outside it: every link of a committed page leads into the repository
or to a public http(s) URL, and no committed file sends a reader to a sibling directory
(``../shared``) that only the developers' machines have.

The check runs on the committed files (``git ls-files``), so a page a user's clone lacks cannot
hide behind a file that happens to exist beside this work tree.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Inline links and images ``[text](target "title")``, reference definitions ``[name]: target``
# and HTML ``href``/``src`` attributes.
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
                  r"|^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)"
                  r"|\b(?:href|src)=\"([^\"]+)\"", re.M)
PUBLIC = re.compile(r"https?://[^/\s]+", re.I)
# Text files that users read: pages, code, package data, the project's settings.
TEXT = (".md", ".py", ".js", ".mjs", ".ts", ".json", ".toml", ".yml", ".yaml", ".txt", ".html",
        ".cfg", ".service", ".sh")


@functools.cache
def tracked() -> tuple[str, ...]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    return tuple(n for n in names if n and (REPO / n).is_file())


@functools.cache
def in_repository() -> frozenset[Path]:
    """Every committed file and every folder that holds one (the repository's root included)."""
    return frozenset(p for n in tracked() for p in (REPO / n, *(REPO / n).parents)
                     if p.is_relative_to(REPO))


def committed(*suffixes: str) -> list[Path]:
    return [REPO / n for n in tracked() if n.endswith(suffixes) and "node_modules/" not in n]


def outside_links(page: Path, text: str) -> list[str]:
    """The links of ``page`` that lead neither into the repository nor to an http(s) URL."""
    bad = []
    for m in LINK.finditer(text):
        target = next(g for g in m.groups() if g is not None)
        path = target.split("#", 1)[0].split("?", 1)[0]
        if PUBLIC.match(target) or target.startswith("#") or target.startswith("mailto:"):
            continue
        if ":" in path.split("/", 1)[0] or path.startswith("/"):  # file:, ftp:, /absolute
            bad.append(target)
            continue
        if (page.parent / path).resolve() not in in_repository():
            bad.append(target)  # outside the clone, or not committed
    return bad


def test_every_link_of_a_committed_page_stays_inside_or_is_public() -> None:
    broken = [f"{page.relative_to(REPO)}: {target}"
              for page in committed(".md")
              for target in outside_links(page, page.read_text(encoding="utf-8"))]
    assert broken == [], broken


def test_no_committed_file_sends_a_reader_outside_the_clone() -> None:
    """``../shared`` (the developers' contract and specs) and its ``DESIGN.md`` are not in a
    user's clone: the project's own pages are docs/design.md and docs/formats.md."""
    found = []
    for path in committed(*TEXT):
        if path == Path(__file__):  # it names them to look for them
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace")
                                 .splitlines(), 1):
            if "../shared" in line or re.search(r"(?<![\w/])DESIGN\.md", line):
                found.append(f"{path.relative_to(REPO)}:{n}")
    assert found == [], found


def test_the_link_check_catches_what_it_is_for() -> None:
    page = REPO / "docs" / "page.md"
    text = ("[a](../shared/DESIGN.md) [b](http-api.md#x) [c](https://c2sp.org/tlog-tiles) "
            "[d](/etc/passwd) [e](file:///x) [f](#here) [g](../../outside.md) "
            "[h](../ledger/core/) [i](missing.md)\n[j]: ../README.md\n[k]: ../../../x\n"
            '<img src="screenshots/nope.png">')
    assert outside_links(page, text) == ["../shared/DESIGN.md", "/etc/passwd", "file:///x",
                                         "../../outside.md", "missing.md", "../../../x",
                                         "screenshots/nope.png"]
