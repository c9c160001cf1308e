"""The layout of tests/ (ARCHITECTURE.md, "Where a new thing goes"), enforced.

- No test module imports another test module: what two test modules share lives in a helper
  module (the fixtures module, ``tests/notary_server.py``...), so running, moving or deleting one
  test module never changes another.
- ``tests/ledger/`` and ``tests/notary/`` mirror their packages: each folder there is named for
  a package of ``ledger/`` or ``notary/`` and holds the tests of that package, so the tests of a
  module are found where the module is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
MIRRORED = ("ledger", "notary")


def imported_test_modules(source: str, package: str) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every test module that ``source``, a module of the package
    ``package`` of tests/, imports: at any depth, absolute or relative, ``import`` or
    ``from``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([base] if base else [])])
            # ``from PACKAGE import test_x`` imports a module too.
            targets = [base] if _is_test_module(base) else \
                [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if _is_test_module(target):
                yield node.lineno, target


def _is_test_module(name: str) -> bool:
    return name.startswith("tests.") and any(p.startswith("test_") for p in name.split("."))


def modules_of_tests() -> Iterator[tuple[Path, str]]:
    """Every module under tests/ and the dotted name of its package."""
    for path in sorted(TESTS.rglob("*.py")):
        yield path, ".".join(path.parent.relative_to(ROOT).parts)


def test_the_import_check_sees_every_form() -> None:
    source = "\n".join([
        "import tests.notary.test_x",
        "from tests.ledger.cli.test_y import ok",
        "from tests.notary.gateway import test_gateway",
        "from .test_z import helper",
        "def f():",
        "    from tests.notary.verifier.test_verifier import notary",
        "from tests.notary_server import LiveNotary",  # a helper module: allowed
        "from tests.ledger.cli.command import ok",  # a helper module beside tests: allowed
    ])
    found = [name for _, name in imported_test_modules(source, "tests.ledger.cli")]
    assert found == ["tests.notary.test_x", "tests.ledger.cli.test_y",
                     "tests.notary.gateway.test_gateway", "tests.ledger.cli.test_z",
                     "tests.notary.verifier.test_verifier"]


def test_no_test_module_imports_another() -> None:
    found = [f"{path.relative_to(ROOT)}:{line} imports {target}"
             for path, package in modules_of_tests()
             for line, target in imported_test_modules(path.read_text(), package)]
    assert not found, ("a test module imports another; move what they share into a helper "
                       "module (see tests/fixtures.py):\n" + "\n".join(found))


@pytest.mark.parametrize("package", MIRRORED)
def test_test_folders_mirror_the_package(package: str) -> None:
    folders = sorted(p for p in (TESTS / package).iterdir()
                     if p.is_dir() and p.name != "__pycache__")
    assert folders, f"tests/{package}/ has no folders"
    for folder in folders:
        assert (ROOT / package / folder.name / "__init__.py").is_file(), \
            f"tests/{package}/{folder.name}/ names no package of {package}/"
        assert (folder / "__init__.py").is_file(), \
            f"tests/{package}/{folder.name}/ has no __init__.py"


def test_ledger_tests_live_in_the_folder_of_their_package() -> None:
    flat = sorted(p.name for p in (TESTS / "ledger").glob("test_*.py"))
    assert not flat, f"tests/ledger/ holds tests outside a package's folder: {flat}"
