"""A receipt's inclusion proof computed from a log's tiles, for ``notary verify --upgrade
--log-url URL`` when the notary cannot give one (it is gone, say): ``URL`` is where the log is
read, e.g. a tlog-mirror's monitoring prefix ``<mirror URL>/<origin hash>`` (C2SP tlog-mirror),
whose checkpoint carries the mirror's cosignature beside the log's signature.

Nothing read here is trusted: the proof bundle made (that checkpoint, the receipt's index and
the path read out of the hash tiles) is verified by the caller like any proof a notary serves.
"""

from __future__ import annotations

from ledger.client.http import FetchError, HttpClient
from ledger.client.tiles import LogSource
from ledger.core.checkpoint import parse_checkpoint_text
from ledger.core.note import NoteError, parse_note
from ledger.core.proofs import assemble, inclusion_plan, plan_coords
from ledger.core.tlog_proof import ProofBundle, ProofBundleError
from notary.core.receipts import Receipt

__all__ = ["proof_from_tiles"]


async def proof_from_tiles(receipt: Receipt, log_url: str, http: HttpClient
                           ) -> tuple[str | None, str]:
    """(tlog-proof text of the receipt's entry into the checkpoint served at ``log_url``, what
    was done), or (None, why there is none)."""
    base = log_url.rstrip("/")
    source = LogSource(base, http, pipeline=False)
    try:
        note = await source.checkpoint()
        size = parse_checkpoint_text(parse_note(note).text).size
        if receipt.index >= size:
            return None, (f"the checkpoint at {base} (size {size}) does not cover index "
                          f"{receipt.index} yet")
        plan = inclusion_plan(receipt.index, size)
        proof = assemble(plan, await source.hashes(plan_coords(plan), size))
        bundle = ProofBundle(receipt.index, tuple(proof), note).encode()
    except FetchError as e:
        return None, f"none could be computed from {base}: {e}"
    except (NoteError, ProofBundleError, ValueError) as e:
        return None, f"none could be computed from {base}: its checkpoint: {e}"
    finally:
        await source.close()
    return bundle.decode("utf-8"), (f"inclusion proof computed from the tiles at {base} "
                                    f"(size {size})")
