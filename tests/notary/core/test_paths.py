"""``/v1/tool-calls`` has one home (notary/core/paths.py): the routes serve what the clients
build, and no other production module spells the path in a string of its own."""

from __future__ import annotations

import ast
from pathlib import Path

from notary.core.paths import (
    COSE_RECEIPT_ROUTE,
    RECEIPT_ROUTE,
    TOOL_CALLS_PATH,
    VERIFY_PATH,
    receipt_path,
)
from notary.http.app import create_app
from notary.serving.config import Settings

REPO = Path(__file__).resolve().parents[3]
HOME = REPO / "notary" / "core" / "paths.py"


def spelled_paths(path: Path) -> list[int]:
    """Lines of ``path`` whose string literals (f-string parts included) hold the path. Prose
    may name a route for the reader (a docstring, a flag's help, a settings row: more than
    three words); code builds it from the constants."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings and "/v1/tool-calls" in node.value
            and len(node.value.split()) <= 3]


def test_no_production_module_spells_the_path_but_its_home() -> None:
    found = [f"{py.relative_to(REPO)}:{n}" for package in ("notary", "ledger")
             for py in sorted((REPO / package).rglob("*.py")) if py != HOME
             for n in spelled_paths(py)]
    assert found == [], found


def test_the_app_serves_the_paths_the_clients_build(tmp_path: Path) -> None:
    app = create_app(Settings(data=tmp_path / "data"))
    served = {(r.method, r.resource.canonical) for r in app.router.routes()
              if r.resource is not None}
    assert ("POST", TOOL_CALLS_PATH) in served and ("GET", TOOL_CALLS_PATH) in served
    assert ("POST", VERIFY_PATH) in served
    assert ("GET", RECEIPT_ROUTE) in served and ("GET", COSE_RECEIPT_ROUTE) in served


def test_an_id_cannot_name_another_path() -> None:
    assert receipt_path("tc_S0ng9Vz-5gkPPiNuTYmVQA") == "/v1/tool-calls/tc_S0ng9Vz-5gkPPiNuTYmVQA"
    assert receipt_path("../verify?x") == "/v1/tool-calls/..%2Fverify%3Fx"
