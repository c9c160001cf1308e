"""A monitor for a notary's log (or any tlog-tiles log with Ed25519 checkpoints).

- :mod:`.core`: verify each new checkpoint against the last one, alarm with evidence;
- :mod:`.audit`: download new entries and tiles, recompute every tile and the root;
- :mod:`.source`: reading the log over HTTP;
- :mod:`.state`: what survives restarts (atomic JSON file);
- :mod:`.cli`: ``notary monitor``.
"""

from __future__ import annotations

from .cli import register

__all__ = ["register"]
