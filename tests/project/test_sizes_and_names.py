"""Rooms a newcomer can hold, enforced rather than remembered.

- No production module over :data:`MAX_MODULE_LINES` lines.
- No production function over :data:`MAX_FUNCTION_LINES` lines or :data:`MAX_BRANCHES`
  branches; a longer one is split into named steps that read like a list.
- No two production classes share a name (a leading underscore does not make another name):
  a reader who meets ``Answer`` or ``LogSource`` should not have to ask which one.

Each exception is named below with its reason, and in the "Size exceptions" section of
ARCHITECTURE.md. An exception marked pending is being split elsewhere; once it is within the
limits, its entry here is stale and the test says so, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ledger", "notary")

MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 80
MAX_BRANCHES = 30

# module path -> why it may be longer (ARCHITECTURE.md, "Size exceptions").
MODULE_EXCEPTIONS: dict[str, str] = {}

# "path::Qualified.name" -> why it may be longer or branchier.
FUNCTION_EXCEPTIONS: dict[str, str] = {
    "notary/cli/gateway.py::register": "a flat table: the `notary gateway` command's "
                                       "arguments and subcommands, one add_argument a line",
}

# class name -> why it may be defined more than once.
CLASS_NAME_EXCEPTIONS: dict[str, str] = {}


def production_modules(root: Path = ROOT) -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((root / package).rglob("*.py"))


def branches(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The decision points of ``function``'s own body (cyclomatic complexity minus one).

    Counted: each ``if``/``elif``, loop, ``except`` clause and ``case``, each conditional
    expression, each comprehension's loop and condition, and each operand of ``and``/``or``
    after the first, lambdas' included. A nested function or class is counted on its own,
    not here; its lines are part of the function that holds it.
    """
    count = 0
    stack: list[ast.AST] = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.If | ast.For | ast.AsyncFor | ast.While | ast.IfExp
                      | ast.ExceptHandler | ast.match_case):
            count += 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        stack.extend(ast.iter_child_nodes(node))
    return count


def function_sizes(source: str) -> Iterator[tuple[str, int, int]]:
    """(qualified name, lines, branches) of every function in ``source``, nested ones too."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, int]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                assert child.end_lineno is not None
                yield name, child.end_lineno - child.lineno + 1, branches(child)
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(ast.parse(source), "")


def oversized_functions(root: Path = ROOT) -> dict[str, str]:
    """``path::name`` -> its size, for each production function over the limits."""
    found: dict[str, str] = {}
    for path in production_modules(root):
        for name, lines, count in function_sizes(path.read_text(encoding="utf-8")):
            if lines > MAX_FUNCTION_LINES or count > MAX_BRANCHES:
                found[f"{path.relative_to(root)}::{name}"] = f"{lines} lines, {count} branches"
    return found


def oversized_modules(root: Path = ROOT) -> dict[str, int]:
    found: dict[str, int] = {}
    for path in production_modules(root):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            found[str(path.relative_to(root))] = lines
    return found


def class_definitions(root: Path = ROOT) -> dict[str, list[str]]:
    """Each class name, leading underscores stripped, -> where a class of that name is defined."""
    found: dict[str, list[str]] = {}
    for path in production_modules(root):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name.lstrip("_"), []).append(
                    f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def test_no_function_over_the_limits() -> None:
    found = oversized_functions()
    over = {name: size for name, size in found.items() if name not in FUNCTION_EXCEPTIONS}
    assert not over, "split into named steps, or name the exception and its reason:\n" + \
        "\n".join(f"{name}: {size}" for name, size in sorted(over.items()))
    stale = sorted(set(FUNCTION_EXCEPTIONS) - set(found))
    assert not stale, f"within the limits now; remove from FUNCTION_EXCEPTIONS: {stale}"


def test_no_module_over_the_limit() -> None:
    found = oversized_modules()
    over = {path: n for path, n in found.items() if path not in MODULE_EXCEPTIONS}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"
    stale = sorted(set(MODULE_EXCEPTIONS) - set(found))
    assert not stale, f"within the limit now; remove from MODULE_EXCEPTIONS: {stale}"


def test_each_exception_is_named_in_architecture_md() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Size exceptions", 1)[-1].split("\n## ", 1)[0]
    assert "## Size exceptions" in text
    names = [*MODULE_EXCEPTIONS, *CLASS_NAME_EXCEPTIONS,
             *(part for key in FUNCTION_EXCEPTIONS for part in key.split("::"))]
    missing = [name for name in names if f"`{name}`" not in section]
    assert not missing, f"not named in ARCHITECTURE.md's Size exceptions: {missing}"


def test_no_two_classes_share_a_name() -> None:
    twice = {name: where for name, where in class_definitions().items()
             if len(where) > 1 and name not in CLASS_NAME_EXCEPTIONS}
    assert not twice, "classes that share a name:\n" + "\n".join(
        f"{name}: {', '.join(where)}" for name, where in sorted(twice.items()))
    stale = sorted(name for name in CLASS_NAME_EXCEPTIONS
                   if len(class_definitions().get(name, [])) < 2)
    assert not stale, f"defined once now; remove from CLASS_NAME_EXCEPTIONS: {stale}"


# --- the checker itself ---------------------------------------------------------------------


def _sizes(source: str) -> dict[str, tuple[int, int]]:
    return {name: (lines, count) for name, lines, count in function_sizes(source)}


@pytest.mark.parametrize(("body", "expected"), [
    ("    return 1\n", 0),
    ("    if a:\n        pass\n    elif b:\n        pass\n    else:\n        pass\n", 2),
    ("    for x in y:\n        while x:\n            pass\n", 2),
    ("    try:\n        pass\n    except A:\n        pass\n    except B:\n        pass\n", 2),
    ("    return a if b else c\n", 1),
    ("    return a and b and c or d\n", 3),
    ("    return [x for x in y if x if not x]\n", 3),
    ("    match a:\n        case 1:\n            pass\n        case _:\n            pass\n", 2),
])
def test_branches_are_the_decision_points(body: str, expected: int) -> None:
    assert _sizes("def f():\n" + body)["f"] == (len(body.splitlines()) + 1, expected)


def test_nested_functions_count_their_own_branches_and_their_holders_lines() -> None:
    source = (
        "class C:\n"
        "    def outer(self):\n"
        "        if a:\n"
        "            pass\n"
        "        def inner():\n"
        "            if b:\n"
        "                pass\n"
        "            return lambda: c if d else e\n"
        "        return inner\n"
    )
    assert _sizes(source) == {"C.outer": (8, 1), "C.outer.inner": (4, 2)}


def test_oversized_functions_and_shared_class_names_are_found(tmp_path: Path) -> None:
    (tmp_path / "ledger").mkdir()
    (tmp_path / "notary").mkdir()
    long_body = "".join(f"    x{i} = {i}\n" for i in range(80))
    branchy = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(31))
    (tmp_path / "ledger" / "a.py").write_text(
        f"def long():\n{long_body}\ndef branchy(x):\n{branchy}\nclass Answer:\n    pass\n")
    (tmp_path / "notary" / "b.py").write_text("class _Answer:\n    pass\n")
    assert oversized_functions(tmp_path) == {"ledger/a.py::long": "81 lines, 0 branches",
                                             "ledger/a.py::branchy": "63 lines, 31 branches"}
    assert class_definitions(tmp_path)["Answer"] == ["ledger/a.py:147 Answer",
                                                     "notary/b.py:1 _Answer"]
