"""A C2SP tlog-witness: cosigns checkpoints of the logs it follows, never two inconsistent ones.

- :mod:`ledger.cosigner`: what it shares with the mirror (the add-checkpoint flow, the routes);
- :mod:`.store`: the durable, atomic per-origin state (SQLite);
- :mod:`.server`: the witness (a Cosigner with metrics) and its aiohttp application;
- :mod:`ledger.client.witness`: submitting a checkpoint to a witness;
- :mod:`ledger.cli.witness`: ``witness keygen`` and ``witness serve``.
"""
