"""Path facts resolved through symlinks on the gateway's own host, for an upstream running there.

A policy's path rules are lexical (:func:`notary.gateway.policy.normalize_path`): a symlink
``/public/docs/link`` pointing into a denied ``/public/private`` makes
``/public/docs/link/secret`` pass every rule written for ``/public/private``, and a server
that follows symlinks inside its own directories (the reference filesystem server does)
serves it. An upstream started as a command on this host (stdio) sees this host's file
system, so the gateway resolves each ``path`` fact the way that server will before any rule
applies: symlinks are followed as far as the path exists, and a missing tail is appended to
its longest existing, resolved prefix (a file about to be created below a symlinked
directory is judged where it would land). The resolved path is the fact the decision is
made, logged and audited on.

A remote upstream (an HTTP URL) has a file system the gateway cannot see: it must confine
its symlinks itself, and the facts stay lexical.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from notary.gateway.policy import CoercionError, Policy, ToolPolicy, normalize_path
from notary.gateway.policy.facts import nfc

__all__ = ["has_path_facts", "resolve_path", "resolve_path_facts", "symlinked_rule_paths"]

_PATH_TYPES = ("path", "paths")


def has_path_facts(spec: ToolPolicy | None) -> bool:
    """Whether the tool's policy reads any ``path`` or ``paths`` fact."""
    return spec is not None and any(f.type in _PATH_TYPES for f in spec.facts)


def resolve_path(path: str) -> str:
    """``path`` (a path fact) as this host's file system resolves it; raises CoercionError.

    Component by component from the root: an existing name is resolved through symlinks
    (``realpath``); a name that does not exist as spelled is looked up among the directory's
    entries by its NFC form, as the reference filesystem server does (it maps a name to a
    canonically equivalent entry), and resolved if exactly one matches; otherwise it and the
    rest of the path are appended to what was resolved so far. The result is in NFC: names
    on disk may be decomposed, and rules compare in NFC.

    Relative paths are left alone: the gateway does not know the upstream's working
    directory, and a relative path never passes an absolute prefix anyway.
    """
    if not path.startswith("/"):
        return path
    try:
        resolved = _walk(path)
    except (OSError, ValueError) as e:
        raise CoercionError(f"the path cannot be resolved on this host ({type(e).__name__})"
                            ) from None
    return path if resolved == path else normalize_path(nfc(resolved))


def _walk(path: str) -> str:
    """The resolution of an absolute path in lexical normal form (see :func:`resolve_path`)."""
    names = [n for n in path.split("/") if n]
    current = "/"
    for i, name in enumerate(names):
        candidate = os.path.join(current, name)
        if not os.path.lexists(candidate):
            entry = _equivalent_entry(current, name)
            if entry is None:
                return os.path.join(current, *names[i:])
            candidate = os.path.join(current, entry)
        # ``current`` is resolved already, so only a symlink needs realpath (one lstat per
        # name, not per prefix); not strict: a link to a missing target resolves as far as
        # the target exists.
        current = os.path.realpath(candidate) if os.path.islink(candidate) else candidate
    return current


def _equivalent_entry(directory: str, name: str) -> str | None:
    """The one entry of ``directory`` whose NFC form is ``name``'s, else None."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return None
    wanted = nfc(name)
    matches = [e for e in entries if nfc(e) == wanted]
    return matches[0] if len(matches) == 1 else None


def resolve_path_facts(spec: ToolPolicy | None, facts: Mapping[str, object]
                       ) -> tuple[dict[str, object], list[str]]:
    """``facts`` with every path fact of ``spec`` resolved; problems for the operator's log.

    A path fact that cannot be resolved is dropped (so every rule on it fails), with a
    problem that names the fact, never the path.
    """
    out = dict(facts)
    problems: list[str] = []
    if spec is None:
        return out, problems
    for fact in spec.facts:
        if fact.type not in _PATH_TYPES or fact.name not in out:
            continue
        value = out[fact.name]
        try:
            # Coerced facts: a path is a string, paths a list of them.
            if isinstance(value, str):
                out[fact.name] = resolve_path(value)
            elif isinstance(value, list):
                out[fact.name] = [resolve_path(item) for item in value if isinstance(item, str)]
        except CoercionError as e:
            del out[fact.name]
            problems.append(f"fact {fact.name!r}: {e}")
    return out, problems


def symlinked_rule_paths(policy: Policy) -> list[str]:
    """The policy's path prefixes that this host resolves to another path, as problems.

    Facts are resolved before the rules apply, so a prefix written through a symlink
    (``/srv/files`` for ``/data/files``) would never match: an allow rule would deny
    everything, and a deny rule would deny nothing. The gateway refuses such a policy rather
    than resolve the rule values itself, so that the committed document alone decides (an
    auditor re-evaluates it on other hosts). Globs and regexes cannot be checked this way.
    """
    problems: list[str] = []
    for tool in policy.tools.values():
        for rule in tool.rules:
            if rule.kind not in _PATH_TYPES:
                continue
            for prefix in rule.prefixes:
                try:
                    resolved = resolve_path(prefix)
                except CoercionError as e:
                    problems.append(f"tools.{tool.name}: rule {rule.describe()}: {e}")
                    continue
                if resolved != prefix:
                    problems.append(f"tools.{tool.name}: rule {rule.describe()}: {prefix!r} "
                                    f"is {resolved!r} on this host (a symlink on the way); "
                                    "path facts are resolved before the rules apply, so "
                                    "write the resolved path")
    return problems
