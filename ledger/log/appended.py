"""What an append answers: where its entries landed and the checkpoint that first commits them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, overload

Result = TypeVar("Result")
"""What the writer's hook answered for an entry (:data:`ledger.log.sequencer.BatchHook`)."""


@dataclass(frozen=True)
class Appended(Generic[Result]):
    """Where an entry landed, and the durable signed checkpoint that first commits to it.

    ``proof`` is the entry's inclusion proof in that checkpoint when it was asked for
    (``append(..., proof=True)``) and could be computed from cached tiles; else None."""

    index: int
    size: int
    checkpoint: bytes
    proof: tuple[bytes, ...] | None = None
    result: Result | None = None
    """What the writer's hook answered for the entry (None without a hook)."""


class AppendedRun(Sequence[Appended[None]]):
    """Where a group of entries landed: consecutive indexes from ``first``, all first committed
    by one checkpoint. A sequence of :class:`Appended` made when read, so a bulk append of a
    hundred thousand entries does not build a hundred thousand objects nobody looks at."""

    __slots__ = ("checkpoint", "first", "length", "size")

    def __init__(self, first: int, length: int, size: int, checkpoint: bytes) -> None:
        self.first, self.length, self.size, self.checkpoint = first, length, size, checkpoint

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, i: int) -> Appended[None]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Appended[None]]: ...
    def __getitem__(self, i: int | slice) -> Appended[None] | Sequence[Appended[None]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.length))]
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError("AppendedRun index out of range")
        return Appended(self.first + i, self.size, self.checkpoint)
