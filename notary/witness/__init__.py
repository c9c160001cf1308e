"""A C2SP tlog-witness: cosigns checkpoints of the logs it follows, never two inconsistent ones.

- :mod:`.protocol`: the pure ``add-checkpoint`` codecs and the witness's decision;
- :mod:`.store`: the durable, atomic per-origin state (SQLite);
- :mod:`.server`: the aiohttp service;
- :mod:`.client`: submitting a checkpoint to a witness (used by the notary's witnessing task);
- :mod:`.cli`: ``notary witness keygen`` and ``notary witness serve``.
"""

from __future__ import annotations

from .cli import register

__all__ = ["register"]
