"""A C2SP tlog-witness: cosigns checkpoints of the logs it follows, never two inconsistent ones.

- :mod:`ledger.core.witness_protocol`: the pure ``add-checkpoint`` codecs and the decision;
- :mod:`.store`: the durable, atomic per-origin state (SQLite);
- :mod:`.server`: the aiohttp service;
- :mod:`ledger.client.witness`: submitting a checkpoint to a witness;
- :mod:`ledger.cli.witness`: ``witness keygen`` and ``witness serve``.
"""
