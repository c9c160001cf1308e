"""The log's HTTP paths that other parts build or parse, in one place.

A receipt's ``entry_url`` is the notary's base URL, :data:`ENTRIES_PATH` and the entry's index;
the read API serves that path, stores recognise it in the receipts they migrate, and verifiers
strip it to find the log's base URL. Pure constants, no I/O.
"""

from __future__ import annotations

__all__ = ["ENTRIES_PATH"]

ENTRIES_PATH = "/v1/ledger/entries/"
"""What a base URL gets before an entry's index (``/v1/ledger/entries/{index}``)."""
