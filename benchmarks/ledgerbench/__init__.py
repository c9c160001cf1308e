"""The ledger benchmark (``python -m benchmarks.ledger_bench``), one module per part of it.

- :mod:`.workload`: sizes, durations, the entries and the signing key both systems get;
- :mod:`.limits`: phase 1, the machine's own limits (SHA-256, Ed25519, fsync'd commits);
- :mod:`.appends`: phase 2, durable appends through the public API;
- :mod:`.builds`: phase 3, growing big logs in child processes, and phase 6, their disk use;
- :mod:`.proofs`: phases 4 and 5, proof latency and verification rate;
- :mod:`.peer`: pymerkle 7, the optional (GPL) peer, imported only when it is installed;
- :mod:`.profiling`: ``--profile``, where the time of appends and proofs goes;
- :mod:`.report`: the targets and the tables.
"""
