"""Timestamps as people and JSON read them: RFC 3339, UTC, milliseconds (pure).

The log stores UNIX seconds (a float); anything shown to a user or put in a JSON answer is
written the way receipts write ``issued_at`` (``2026-11-29T21:00:30.763Z``), so there is one
time format across the API and the CLIs.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["rfc3339"]


def rfc3339(seconds: float) -> str:
    """UNIX seconds as RFC 3339 UTC with milliseconds (``2026-01-01T00:00:00.000Z``)."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
