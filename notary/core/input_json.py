"""The one strict rule for JSON a verifier or a command reads from a file: its bounds and parser.

Here, not in :mod:`notary.verifier.inputs` (which re-exports them), so that ``notary hash``
reads a record without loading the verifier.
"""

from __future__ import annotations

from typing import Any

from ledger.core.boundedjson import parse_json
from notary.core.canonical import MAX_DEPTH

__all__ = ["MAX_INPUT_BYTES", "MAX_INPUT_DEPTH", "parse_input_json"]

MAX_INPUT_BYTES = 64 << 20
"""Largest JSON document the verifier reads (tool call, record, receipt, JWKS, state file); far
above any tool call (the notary takes 64 KiB bodies). The JavaScript verifier's is
``MAX_JSON_BYTES`` in js/src/json.js; the cross-language corpus checks the two are equal."""
MAX_INPUT_DEPTH = MAX_DEPTH + 8
"""The one nesting bound of verifier input: a call record may nest
:data:`~notary.core.canonical.MAX_DEPTH` deep, inside a few levels of saved call or receipt. The
JavaScript verifier's is ``MAX_JSON_DEPTH`` in js/src/json.js; the corpus checks they agree."""


def parse_input_json(text: str | bytes) -> Any:
    """A document the verifier reads, parsed by the one strict rule both verifiers share
    (:func:`ledger.core.boundedjson.parse_json`: UTF-8 without a BOM, unique member names, no
    NaN or Infinity, at most :data:`MAX_INPUT_DEPTH` deep); raises ``JsonError``. A file someone
    sent may be as hostile as a network answer."""
    return parse_json(text, max_bytes=MAX_INPUT_BYTES, max_depth=MAX_INPUT_DEPTH)
