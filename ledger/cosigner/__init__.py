"""What a C2SP tlog-witness and a tlog-mirror share, the two being cosigners of the logs they
follow: :mod:`.cosigner` (keys, logs, ``add-checkpoint`` and ``sign-subtree`` over a
:class:`~.cosigner.CosignerState`), :mod:`.app` (their shared aiohttp routes) and :mod:`.sqlite`
(a state's SQLite file on its own thread).

:mod:`ledger.witness` and :mod:`ledger.mirror` build on it; the pure protocol codecs and the
compare step are in :mod:`ledger.core.witness_protocol`.
"""
