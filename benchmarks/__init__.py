"""Benchmarks, run as modules from the repository root: ``python -m benchmarks.NAME``.

They are a package so that they import one another (and ``ledger``/``notary``) as installed
code, with no ``sys.path`` edits. Results go to ``benchmarks/results/local/`` (untracked)
unless a run is asked to ``--save`` the tracked figures in ``benchmarks/results/``.
"""
