"""A monitor for any tlog-tiles log with Ed25519 checkpoints.

- :mod:`.core`: verify each new checkpoint against the last one, alarm with evidence;
- :mod:`.audit`: download new entries and tiles, recompute every tile and the root;
- :mod:`.state`: what survives restarts (atomic JSON file);
- :mod:`ledger.client.tiles`: reading the log over HTTP (:mod:`ledger.client.http`);
- :mod:`ledger.cli.monitor`: the ``monitor`` command.
"""
