"""What runs first in a verification worker process (kept tiny: every worker imports it)."""

from __future__ import annotations

import contextlib
import os


def lower_priority() -> None:
    """Verification is best effort next to notarization: let the scheduler prefer the server's
    event loop when the CPU is contended (nice 10 on top of the server's own niceness)."""
    with contextlib.suppress(OSError):
        os.nice(10)
