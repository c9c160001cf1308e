"""A frozen log's final checkpoint, handed once to a witness or mirror when the log is rolled
(docs/lifecycle.md): the witnessing job's last submission for that log, from the size it knew."""

from __future__ import annotations

from ledger.client.mirror import LogReaderSource, MirrorClient
from ledger.client.witness import WitnessClient, WitnessConflict, WitnessError
from ledger.log.reader import LogReader

__all__ = ["submit_final"]


async def submit_final(client: WitnessClient | MirrorClient, known: int, reader: LogReader,
                       note: bytes, size: int) -> None:
    """Get ``note`` (the frozen log's final checkpoint, of ``size``) cosigned by ``client``,
    from its size ``known`` for that log (0: unknown; a 409 teaches it). A mirror is pushed the
    entries it lacks too. Raises what the client raises when it refuses."""
    if isinstance(client, MirrorClient):
        client.pending = max(client.pending, known)
        await client.push(note, LogReaderSource(reader))
        return
    old = known
    for _ in range(3):
        proof = await reader.consistency_proof(old, size) if 0 < old < size else []
        try:
            await client.add_checkpoint(old, proof, note)
            return
        except WitnessConflict as c:
            if c.root_mismatch or c.size > size:
                raise WitnessError(f"{client.verifier.name} holds size {c.size} with another "
                                   "root, or beyond the final size") from None
            old = c.size
    raise WitnessError(f"{client.verifier.name} kept answering 409")
