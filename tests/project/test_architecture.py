"""The layering rules of docs/design.md ("Two packages, one direction"), enforced rather than
remembered.

- The import-linter contracts in pyproject.toml (`ledger` never imports `notary`; the `core/`
  packages import no I/O; only the CLI packages import a CLI module) must all be kept.
- No import cycle anywhere, function-level imports included. import-linter has no whole-graph
  cycle contract, so this module walks the AST of every module itself.
- A function-level import is allowed only where it defers a heavy import, and says so with a
  ``# deferred:`` comment on its line or the line above, so that laziness is a choice made once,
  not a way to hide a cycle.
- ``argparse`` is imported only by the CLI packages.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ledger.core.errors import LedgerError, RefusedRequest
from notary.core.errors import NotaryBaseError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ledger", "notary")
CLI_PACKAGES = ("ledger.cli", "notary.cli")
DEFER_MARK = "# deferred:"



@dataclass(frozen=True)
class Import:
    """One import statement's target inside the project, where it is, and how it is nested."""

    importer: str
    target: str
    line: int
    module_level: bool
    type_checking: bool


def module_names(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of the packages under root by dotted name (a package is its __init__)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_imports(
    node: ast.AST, module_level: bool, type_checking: bool
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import under node, with whether it runs at import time and under TYPE_CHECKING."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, module_level, type_checking
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk_imports(child, False, type_checking)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk_imports(ast.Module(body=[stmt], type_ignores=[]),
                                         module_level, True)
            for stmt in child.orelse:
                yield from _walk_imports(ast.Module(body=[stmt], type_ignores=[]),
                                         module_level, type_checking)
        else:
            yield from _walk_imports(child, module_level, type_checking)


def imports_of(name: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """The project modules that module `name` imports, resolved as the import system would.

    ``from a.b import c`` names the module ``a.b.c`` when that is a module, else ``a.b``;
    relative imports are resolved against the importer's package.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node, module_level, type_checking in _walk_imports(tree, True, False):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                targets.append(candidate if candidate in known else base)
        for target in targets:
            # `import a.b.c` where only `a.b` is ours (or a name inside it) still targets `a.b`.
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target:
                found.append(Import(name, target, node.lineno, module_level, type_checking))
    return found


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a closed path) for every strongly connected component that has one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def strongconnect(start: str) -> None:
        # Iterative Tarjan: the module graph is deep enough that recursion is a needless risk.
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    components.append(component)

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return [_cycle_in(graph, set(component)) for component in components]


def _cycle_in(graph: dict[str, set[str]], members: set[str]) -> list[str]:
    """A shortest closed path through the smallest-named member of a strongly connected set."""
    start = min(members)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # unreachable for a real component


def import_graph(root: Path, packages: Iterable[str]) -> tuple[dict[str, set[str]], list[Import]]:
    known = module_names(root, packages)
    graph: dict[str, set[str]] = {name: set() for name in known}
    every: list[Import] = []
    for name, path in known.items():
        for imp in imports_of(name, path, known):
            every.append(imp)
            graph[name].add(imp.target)
    return graph, every


def _render(cycle: list[str]) -> str:
    return " -> ".join(cycle)


# --- the rules -----------------------------------------------------------------------------------


def test_import_linter_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "import-linter is not installed: pip install -e '.[test]'"
    result = subprocess.run(
        [exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for contract in ("ledger never imports notary", "ledger.core and notary.core import no I/O",
                     "only the CLI packages import a CLI module",
                     "ledger: cli -> shells -> storage -> core",
                     "notary: cli -> shells -> storage -> core"):
        assert f"{contract} KEPT" in result.stdout, result.stdout


def test_no_import_cycles_function_level_imports_included() -> None:
    graph, _ = import_graph(ROOT, PACKAGES)
    cycles = find_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(_render(c) for c in cycles)


def _deferral_marked(lines: list[str], body: list[ast.stmt], position: int) -> bool:
    """Whether the import at body[position] (or the run of imports it ends) says it defers."""
    first = position
    while first > 0 and isinstance(body[first - 1], ast.Import | ast.ImportFrom):
        first -= 1
    candidates = [body[position].lineno - 1, body[first].lineno - 2]
    return any(0 <= i < len(lines) and DEFER_MARK in lines[i] for i in candidates)


def unexplained_function_level_imports(root: Path, packages: Iterable[str]) -> list[str]:
    """``path: source line`` of each function-level import that carries no ``# deferred:``.

    The comment goes on the import's line or on the line above a run of imports.
    """
    found: list[str] = []
    for path in module_names(root, packages).values():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text)
        function_level = {
            id(node) for node, module_level, type_checking in _walk_imports(tree, True, False)
            if not module_level and not type_checking
        }
        for holder in ast.walk(tree):
            for attr in ("body", "orelse", "finalbody"):
                body = getattr(holder, attr, None)
                if not isinstance(body, list):
                    continue
                for position, stmt in enumerate(body):
                    if id(stmt) in function_level and not _deferral_marked(lines, body, position):
                        rel = path.relative_to(root).as_posix()
                        found.append(f"{rel}: {lines[stmt.lineno - 1].strip()}")
    return sorted(found)


def test_function_level_imports_say_why_they_are_deferred() -> None:
    unexplained = unexplained_function_level_imports(ROOT, PACKAGES)
    assert not unexplained, (
        f"function-level imports without a '{DEFER_MARK} <why>' comment "
        "(hoist them, or say which heavy import they defer):\n" + "\n".join(unexplained)
    )


def test_argparse_only_in_cli_packages() -> None:
    offenders: list[str] = []
    for name, path in module_names(ROOT, PACKAGES).items():
        if any(name == cli or name.startswith(cli + ".") for cli in CLI_PACKAGES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, _, _ in _walk_imports(tree, True, False):
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            if any(n == "argparse" or n.startswith("argparse.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, "argparse outside ledger/cli and notary/cli:\n" + "\n".join(offenders)


# --- the checker itself can fail -----------------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def f():\n    from . import c\n",
        "pkg/c.py": "import pkg.a\n",
        "pkg/d.py": "from pkg.a import something\n",
    })
    graph, _ = import_graph(tmp_path, ["pkg"])
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_type_checking_and_relative_imports_are_resolved(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "from .x import thing\n",
        "pkg/sub/x.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from ..y import Y\n"
        ),
        "pkg/y.py": "import pkg.sub\n",
    })
    graph, every = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.sub"] == {"pkg.sub.x"}
    assert graph["pkg.sub.x"] == {"pkg.y"}
    assert [i.type_checking for i in every if i.importer == "pkg.sub.x"] == [True]
    # A cycle that exists only for the type checker still counts: it is the same tangle.
    assert find_cycles(graph) == [["pkg.sub", "pkg.sub.x", "pkg.y", "pkg.sub"]]


@pytest.mark.parametrize("edges", [{"a": {"a"}}, {"a": {"b"}, "b": {"a"}}])
def test_find_cycles_reports_self_loops_and_pairs(edges: dict[str, set[str]]) -> None:
    cycles = find_cycles(edges)
    assert len(cycles) == 1
    assert cycles[0][0] == cycles[0][-1] == "a"


def test_unmarked_function_level_import_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "import json\n",
        "pkg/a.py": (
            "def marked():\n"
            "    # deferred: heavy\n"
            "    import json\n"
            "    import csv\n"
            "    return json, csv\n"
            "def inline():\n"
            "    import json  # deferred: heavy\n"
            "def bare():\n"
            "    x = 1\n"
            "    import csv\n"
        ),
    })
    assert unexplained_function_level_imports(tmp_path, ["pkg"]) == ["pkg/a.py: import csv"]


# --- one error base per package ------------------------------------------------------------------

# Error classes that may stand outside their package's base (none now: the store's errors
# joined LedgerError, and the notary store's own ones NotaryBaseError too).
KNOWN_OUTSIDE_BASE: frozenset[str] = frozenset()


def _error_classes() -> list[type[BaseException]]:
    """Every exception class defined in the two packages (importing every module)."""
    found: list[type[BaseException]] = []
    for name in sorted(module_names(ROOT, PACKAGES)):
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and value.__module__ == name):
                found.append(value)
    return found


def test_every_error_derives_from_its_package_base() -> None:
    outside: list[str] = []
    for cls in _error_classes():
        qualname = f"{cls.__module__}.{cls.__qualname__}"
        if issubclass(cls, RefusedRequest) or cls.__name__.startswith("_"):
            continue  # an answer to a client, or private control flow that never leaves its module
        base = LedgerError if cls.__module__.startswith("ledger") else NotaryBaseError
        if not issubclass(cls, base) and qualname not in KNOWN_OUTSIDE_BASE and not any(
            issubclass(cls, known) for known in _resolve(KNOWN_OUTSIDE_BASE)
        ):
            outside.append(f"{qualname} does not derive from {base.__name__}")
    assert not outside, "\n".join(outside)
    stale = [q for q, cls in zip(sorted(KNOWN_OUTSIDE_BASE), _resolve(sorted(KNOWN_OUTSIDE_BASE)),
                                 strict=True)
             if issubclass(cls, LedgerError | NotaryBaseError)]
    assert not stale, "now on a package base; remove from KNOWN_OUTSIDE_BASE: " + ", ".join(stale)


def _resolve(qualnames: Iterable[str]) -> list[type[BaseException]]:
    out: list[type[BaseException]] = []
    for qualname in qualnames:
        module, _, attr = qualname.rpartition(".")
        cls = getattr(importlib.import_module(module), attr)
        assert isinstance(cls, type) and issubclass(cls, BaseException), qualname
        out.append(cls)
    return out


def test_each_error_name_has_one_meaning() -> None:
    by_name: dict[str, list[str]] = {}
    for cls in _error_classes():
        by_name.setdefault(cls.__name__, []).append(cls.__module__)
    twice = {n: m for n, m in by_name.items() if len(m) > 1}
    assert not twice, f"error classes defined more than once: {twice}"
