"""No class reads another's private fields in the storage packages (issue 36, item 1).

The write path of ``ledger/storage/`` and ``notary/store/`` once ran through transaction and
store classes that read about 30 of each other's ``_fields`` in both directions. What they
share is now named: the transactions' hooks (``ledger.storage.base.TxHooks``), and one state
object per store that the store creates and its transactions receive (``SqliteWriter``,
``MemoryLogs``, ``notary.store.sqlite_state.NotaryState`` …). This keeps it so.

The rule: in these packages, ``x._name`` (one leading underscore, not a dunder) is written only
where ``x`` is the object itself: ``self``, ``cls``, ``super()``, or, in a function, a name it
bound to what ``cls(…)`` or ``super().…(…)`` returned (a factory classmethod setting up the
instance it just made). Everything else modules and classes share is public (no underscore).
Module-level private names that a module imports from another are not attribute reads, and
are not concerned.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("ledger/storage", "notary/store")

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _root(node: ast.expr) -> ast.expr:
    """The innermost receiver of ``a.b(…).c`` (``a``), through calls, awaits and attributes."""
    while True:
        if isinstance(node, ast.Await):
            node = node.value
        elif isinstance(node, ast.Call) and not _is_super(node):
            node = node.func
        elif isinstance(node, ast.Attribute):
            node = node.value
        else:
            return node


def _is_super(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super")


def _made_here(function: _Function) -> set[str]:
    """Names ``function`` binds to an instance made by its own class: ``x = cls(…)``,
    ``x = await super().open(…)``."""
    out = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call | ast.Await):
            root = _root(node.value)
            if _is_super(root) or (isinstance(root, ast.Name) and root.id == "cls"):
                out.add(node.targets[0].id)
    return out


def private_reads(source: str) -> list[tuple[int, str]]:
    """(line, ``receiver._name``) of every private attribute of something other than the
    object itself (see the module), read or written."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, own: frozenset[str]) -> None:
        if isinstance(node, _Function):
            own = own | _made_here(node)
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            receiver = node.value
            if not (_is_super(receiver)
                    or (isinstance(receiver, ast.Name) and receiver.id in own)):
                out.append((node.lineno, f"{ast.unparse(receiver)}.{node.attr}"))
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(ast.parse(source), frozenset({"self", "cls"}))
    return sorted(out)


def test_the_rule_finds_other_objects_privates_only() -> None:
    source = """
class A:
    def f(self, other):
        self._x = other._y
        super()._z()
        cls._w
        self.__dict__
        other.__class__
        self._store._conn

    @classmethod
    async def open(cls, other):
        made = await super().open()
        made._ok = other._no
        again = cls(1)
        again._ok, store = 1, other
        store._no

def g(a):
    a._no
"""
    assert private_reads(source) == [(4, "other._y"), (9, "self._store._conn"),
                                     (14, "other._no"), (17, "store._no"), (20, "a._no")]


def test_no_class_reads_another_class_private_fields() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {name}"
             for folder in CHECKED for path in sorted((ROOT / folder).rglob("*.py"))
             for line, name in private_reads(path.read_text())]
    assert not found, "private fields read from outside their object:\n" + "\n".join(found)
