"""API keys and monthly allowances: the pure parts (key format, hashing, month arithmetic).

A key is ``nk_<12 hex key id>_<43 char secret>``. Only SHA-256 of the secret is stored; the key
id finds the row, and the digests are compared in constant time. The secret has 256 bits of
entropy, so a plain hash (not a slow KDF) is the right tool.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

_KEY_RE = re.compile(r"nk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
ACCOUNT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


@dataclass(frozen=True)
class NewApiKey:
    key_id: str
    secret_sha256: bytes
    token: str  # shown once, never stored


def new_api_key() -> NewApiKey:
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    return NewApiKey(key_id, hashlib.sha256(secret.encode()).digest(), f"nk_{key_id}_{secret}")


def split_api_key(token: str) -> tuple[str, bytes] | None:
    """(key id, SHA-256 of the secret) of a well-formed key, else None."""
    m = _KEY_RE.fullmatch(token)
    if m is None:
        return None
    return m.group(1), hashlib.sha256(m.group(2).encode()).digest()


def digests_match(stored: bytes, presented: bytes) -> bool:
    return hmac.compare_digest(stored, presented)


def month_of(dt: datetime) -> str:
    return f"{dt.year:04d}-{dt.month:02d}"


def seconds_until_next_month(now: datetime) -> int:
    """For ``Retry-After`` when an allowance is spent: allowances reset at 00:00 UTC on the 1st."""
    now = now.astimezone(UTC)
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    start = datetime(year, month, 1, tzinfo=UTC)
    return max(1, int((start - now).total_seconds()) + 1)
