"""The policy salt: 32 random bytes as hex in a 0600 file beside the gateway's state file.

The salt is what keeps a policy commitment from being matched against guessed policies
(a small policy has few plausible variants). It is secret until the operator reveals it
together with the policy for an audit; whoever holds both can recompute the commitment.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from notary.core.errors import NotaryBaseError

__all__ = ["SALT_BYTES", "SaltError", "default_salt_path", "ensure_salt", "legacy_salt_path",
           "read_salt"]

SALT_BYTES = 32
_SALT_RE = re.compile(r"(?:[0-9a-f]{2}){16,}")


class SaltError(NotaryBaseError, ValueError):
    """A salt file is missing or malformed."""


def default_salt_path(state_path: Path) -> Path:
    """``<state file without suffix>.salt``: beside the gateway's state, not the policy.

    The policy file is often kept in a repository, where a salt written next to it would be
    committed (and so revealed) by accident; the state file is the gateway's own, private
    data. ``gateway-state.db`` gets ``gateway-state.salt``.
    """
    state_path = Path(state_path)
    return state_path.with_name(state_path.stem + ".salt")


def legacy_salt_path(policy_path: Path) -> Path:
    """``<policy file>.salt``, where earlier versions kept the salt (still read if present)."""
    policy_path = Path(policy_path)
    return policy_path.with_name(policy_path.name + ".salt")


def read_salt(path: Path) -> str:
    """The salt in ``path`` (lower-case hex of at least 16 bytes)."""
    try:
        text = Path(path).read_text("ascii").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise SaltError(f"cannot read the salt file {path}: {e}") from e
    if _SALT_RE.fullmatch(text) is None:
        raise SaltError(f"the salt file {path} must hold lower-case hex of at least 16 bytes")
    return text


def ensure_salt(path: Path) -> tuple[str, bool]:
    """The salt in ``path``, creating the file (mode 0600, exclusively) if it is absent.

    Returns (salt, created). ``O_EXCL`` means two processes starting at once cannot both
    create a salt and end up committing the same policy under different salts.
    """
    path = Path(path)
    if path.exists():
        return read_salt(path), False
    salt = secrets.token_hex(SALT_BYTES)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_salt(path), False
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(salt + "\n")
        f.flush()
        os.fsync(f.fileno())
    return salt, True
