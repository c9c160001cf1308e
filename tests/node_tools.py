"""Node.js for the tests that compare with JavaScript or run third-party MCP servers.

The tests that need Node never skip: a machine without ``node`` and ``npm`` fails them with a
message that says what to install, because a silent skip would hide that the Python digests
were never compared with JavaScript. npm packages are taken from the repository's own
``js/node_modules`` when it has them (the JS package's pinned versions), otherwise installed
with ``npm install`` (the ordinary client, against the npm registry) into a throwaway prefix
that the caller owns (a pytest temporary directory), so the work tree stays clean.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

__all__ = ["REPO_ROOT", "node_binary", "npm_package"]

REPO_ROOT = Path(__file__).resolve().parent.parent


def node_binary() -> str:
    """The ``node`` executable; raises AssertionError (a failure, not a skip) without it."""
    node = shutil.which("node")
    if node is None:
        raise AssertionError("this test needs Node.js 20+ (`node` on PATH) to compare with "
                             "JavaScript; install it (e.g. apt-get install nodejs npm)")
    return node


def _installed(node_modules: Path, name: str) -> Path | None:
    package = node_modules / name
    return package if (package / "package.json").is_file() else None


def npm_package(name: str, version: str, prefix: Path) -> Path:
    """The directory of npm package ``name``: from ``js/node_modules``, else installed.

    ``version`` is what to install (``canonicalize@2``'s ``2``) when the repository's JS
    package has not installed it; ``prefix`` is a directory the caller throws away.
    """
    node_binary()
    found = _installed(REPO_ROOT / "js" / "node_modules", name)
    if found is not None:
        return found
    found = _installed(prefix / "node_modules", name)
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise AssertionError(f"this test needs npm to install {name}@{version} (or run "
                             "`npm ci` in js/ first)")
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / "package.json").write_text(json.dumps({"private": True}))
    proc = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
         "--loglevel", "error", f"{name}@{version}"],
        capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"npm install {name}@{version} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    found = _installed(prefix / "node_modules", name)
    if found is None:
        raise AssertionError(f"npm install {name}@{version} left no {name} in {prefix}")
    return found
