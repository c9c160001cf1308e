"""The fenced command blocks of the README and docs/, and what each one is marked as.

A block of shell commands is either run by the tested walkthrough (``<!-- walkthrough -->`` on
the line before it, in README.md or docs/walkthrough.md: ``tests/project/test_readme.py``) or
marked ``<!-- example -->``: not run by the tests, so checked by hand before each release
(docs/testing.md). ``python -m tests.doc_blocks`` prints that checklist: every example block,
with its page, line and first command.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console", "zsh"})
EXAMPLE = "<!-- example -->"
WALKTHROUGH = re.compile(r"<!-- walkthrough(?::python \S+)? -->")
FENCE = re.compile(r"^\s*(```|~~~)\s*(?P<lang>[\w+-]*)")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its language, the line before it and its text."""

    page: str  # relative to the repository
    line: int  # 1-based, the opening fence
    lang: str
    marker: str  # the line before the fence, stripped
    body: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def is_shell(self) -> bool:
        return self.lang.lower() in SHELL_LANGUAGES

    @property
    def is_walkthrough(self) -> bool:
        return WALKTHROUGH.fullmatch(self.marker) is not None

    @property
    def is_example(self) -> bool:
        return self.marker == EXAMPLE


def doc_pages(repo: Path = REPO) -> list[Path]:
    """The README and every page under docs/."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def blocks(page: Path, repo: Path = REPO) -> Iterator[Block]:
    """Every fenced block of a page (``` or ~~~, indented or not), in order."""
    name = str(page.relative_to(repo))
    lines = page.read_text(encoding="utf-8").splitlines()
    n = 0
    while n < len(lines):
        opening = FENCE.match(lines[n])
        if opening is None:
            n += 1
            continue
        fence = opening.group(1)
        end = next((k for k in range(n + 1, len(lines)) if lines[k].strip().startswith(fence)),
                   len(lines))
        yield Block(name, n + 1, opening.group("lang"), lines[n - 1].strip() if n else "",
                    "\n".join(lines[n + 1:end]))
        n = end + 1


def shell_blocks(repo: Path = REPO) -> list[Block]:
    return [b for page in doc_pages(repo) for b in blocks(page, repo) if b.is_shell]


def main() -> int:
    """Print the before-release checklist: every example block (a verbatim copy of a walkthrough
    block runs in the walkthrough, so it is left out); exit 1 if a block is neither."""
    shell = shell_blocks()
    ran = {b.body for b in shell if b.is_walkthrough}
    unmarked = 0
    for block in shell:
        if block.is_walkthrough or block.body in ran:
            continue
        first = next((ln.strip() for ln in block.body.splitlines() if ln.strip()), "")
        flag = "[ ]" if block.is_example else "UNMARKED"
        unmarked += not block.is_example
        print(f"{flag} {block.where}  {first}")
    return 1 if unmarked else 0


if __name__ == "__main__":
    sys.exit(main())
