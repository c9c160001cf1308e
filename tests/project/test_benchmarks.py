"""The benchmarks as code: they import as modules, leave the work tree clean, and patch nothing.

No benchmark runs here (figures belong to benchmarks/, not to the suite); this checks what a new
user trips over before any figure: a crash on import, a tracked file rewritten by a trial run.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest

from benchmarks._common import LOCAL_RESULTS, REPO, RESULTS, result_path

BENCH = REPO / "benchmarks"
MODULES = sorted(
    ".".join(p.relative_to(REPO).with_suffix("").parts)
    for p in BENCH.rglob("*.py") if p.name != "__init__.py"
)
# gateway_bench drives the same small MCP upstream the gateway tests use; pg_frontends and
# http_notarize --database postgres and lifecycle_bench --postgres start the same throwaway
# PostgreSQL clusters the tests do; s3_publish the same SeaweedFS server (tests/seaweed.py).
IMPORTS_TESTS = {"benchmarks.gateway_bench", "benchmarks.pg_frontends",
                 "benchmarks.http_notarize", "benchmarks.lifecycle_bench",
                 "benchmarks.s3_publish"}


@pytest.mark.parametrize("name", MODULES)
def test_imports_as_a_module(name: str) -> None:
    importlib.import_module(name)


@pytest.mark.parametrize("name", MODULES)
def test_no_sys_path_edits_and_no_test_imports(name: str) -> None:
    path = REPO / (name.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and \
                isinstance(node.value, ast.Name) and node.value.id == "sys":
            pytest.fail(f"{path.name}:{node.lineno} touches sys.path")
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tests" \
                and name not in IMPORTS_TESTS:
            pytest.fail(f"{path.name}:{node.lineno} imports from tests/")


def test_results_go_where_git_does_not_look_unless_saved(tmp_path: Path) -> None:
    assert result_path("ledger") == LOCAL_RESULTS / "ledger.json"
    assert result_path("ledger", save=True) == RESULTS / "ledger.json"
    assert result_path("ledger", save=True, out=tmp_path / "x.json") == tmp_path / "x.json"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(LOCAL_RESULTS / "ledger.json")],
                             cwd=REPO, check=False)
    assert ignored.returncode == 0, "benchmarks/results/local/ is not gitignored"
    tracked = subprocess.run(["git", "check-ignore", "-q", str(RESULTS / "ledger.json")],
                             cwd=REPO, check=False)
    assert tracked.returncode == 1, "benchmarks/results/*.json must stay tracked"


def test_pymerkle_is_imported_only_by_the_peer_module() -> None:
    for path in BENCH.rglob("*.py"):
        if path.name == "peer.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "pymerkle" for n in names), path


def test_the_profiles_items_add_up_to_the_measured_cpu() -> None:
    """A receipt's CPU, item by item (``http_notarize --profile``): each item is its frames'
    share of the loop's samples, nested frames are not counted twice, and what no item names
    (scheduling, the database thread) makes the items add up to the CPU measured."""
    from benchmarks import http_notarize as h

    def frame(function: str) -> str:
        file, _, name = function.rpartition(":")
        return f"{name} ({REPO / file}:1)"

    loop = "Thread 1 (idle): MainThread"
    serve = [frame(h._SERVE), frame(h._HANDLE)]
    raw = "\n".join([
        ";".join([loop, *serve, frame(h._ISSUE), frame(h._NOTARIZE)]) + " 30",
        ";".join([loop, *serve, frame(h._ISSUE)]) + " 10",
        ";".join([loop, *serve, frame(h._AUTH)]) + " 5",
        ";".join([loop, serve[0], frame(h._WRITE)]) + " 15",
        ";".join([loop, frame(h._COMMIT), frame(h._HOOK), frame(h._SIGN)]) + " 20",
        ";".join([loop, frame(h._COMMIT), frame(h._CHECKPOINT)]) + " 10",
        ";".join([loop, frame(h._COMMIT)]) + " 5",
        ";".join([loop, frame(h._READ)]) + " 5",
        loop + ";" + frame("asyncio/base_events.py:BaseEventLoop._run_once") + " 100",
        "Thread 2 (idle): writer;" + frame("ledger/storage/sqlite.py:SqliteStore._finish") + " 7",
    ])
    # 200 loop samples measured as 400 µs per request: 2 µs a sample.
    p = h.summarize_pyspy(raw, 100, 1000, {"event loop": 400.0, "other threads": 70.0})
    items = {i["item"]: i["us_per_request"] for i in p["items"]}
    assert items["Notary.notarize on the loop: id, time, entry, queueing, proof text, receipt"] \
        == 60
    assert items["the body: strict JSON and field checks"] == 20
    assert items["the API key, from memory"] == 10
    assert items["writing the answer (asyncio's loop; uvloop's is in the task)"] == 30
    assert items["commit: signing the receipts (Ed25519)"] == 40
    assert items["commit: the checkpoint's signature"] == 20
    assert items["commit: the rest (transaction, tiles, store calls)"] == 10
    assert items["event loop: scheduling, wake-ups and the rest"] == 200
    assert items["other threads: the database writer (statements, COMMIT, fsync)"] == 70
    assert all(v >= 0 for v in items.values())
    assert sum(items.values()) == 470


# The pages: benchmarks/README.md is an index, one page per benchmark under benchmarks/docs/,
# the older runs in benchmarks/docs/history.md; code cites those pages, never an issue number.
DOCS = BENCH / "docs"
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_ISSUE = re.compile(r"\bissues? [0-9]+\b(?!,[0-9])", re.IGNORECASE)  # not "issues 2,000"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    return {_anchor(line.lstrip("#")) for line in page.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")}


def test_the_index_is_short_and_links_every_benchmark_to_its_page() -> None:
    index = (BENCH / "README.md").read_text(encoding="utf-8")
    assert len(index.splitlines()) <= 150, "benchmarks/README.md is an index, not a notebook"
    benchmarks = sorted(p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_"))
    assert benchmarks, "no benchmark modules found"
    for name in benchmarks:
        assert (DOCS / f"{name}.md").is_file(), f"benchmarks/docs/{name}.md is missing"
        assert f"(docs/{name}.md)" in index, f"the index does not link {name}'s page"
    assert "(docs/history.md)" in index


def test_every_link_between_the_pages_resolves() -> None:
    pages = [BENCH / "README.md", *sorted(DOCS.glob("*.md"))]
    for page in pages:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://")):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            assert path.is_file(), f"{page.relative_to(REPO)} links {target}: no such file"
            if anchor:
                assert anchor in _anchors(path), \
                    f"{page.relative_to(REPO)} links {target}: no such heading"


def test_no_page_is_titled_by_an_issue_number() -> None:
    for page in [BENCH / "README.md", *sorted(DOCS.glob("*.md"))]:
        for line in page.read_text(encoding="utf-8").splitlines():
            if line.startswith("#"):
                assert not _ISSUE.search(line), f"{page.relative_to(REPO)}: {line}"


def test_code_cites_the_pages_not_the_index_or_an_issue() -> None:
    for package in ("ledger", "notary", "benchmarks"):
        for path in sorted((REPO / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            assert "benchmarks/README.md" not in text, \
                f"{path.relative_to(REPO)} cites the index; cite benchmarks/docs/NAME.md"
            if package == "benchmarks":
                assert not _ISSUE.search(text), f"{path.relative_to(REPO)} cites an issue number"
            for cited in re.findall(r"benchmarks/docs/([\w.-]+\.md)", text):
                assert (DOCS / cited).is_file(), f"{path.relative_to(REPO)} cites {cited}"
