"""How ``ledger add`` cuts its input into commits (:func:`ledger.cli.add._batches`)."""

from __future__ import annotations

import pytest

from ledger.cli import add


def test_lines_go_in_few_large_commits() -> None:
    """100,000 short lines are two commits (each an fsync and a signed checkpoint), in order."""
    entries = [b"%064x" % i for i in range(100_000)]
    batches = list(add._batches(entries))
    assert [len(b) for b in batches] == [add.APPEND_BATCH, 100_000 - add.APPEND_BATCH]
    assert [e for b in batches for e in b] == entries


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 40])
def test_large_entries_are_cut_by_bytes_too(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Entries that outweigh :data:`APPEND_BATCH_BYTES` are cut by size: every batch holds at
    most that many bytes (one entry larger than it goes alone), none is empty, none could have
    taken the next entry, and together they are the input in order."""
    monkeypatch.setattr(add, "APPEND_BATCH", 8)
    monkeypatch.setattr(add, "APPEND_BATCH_BYTES", 100)
    entries = [bytes([i]) * (i * 7 % 45) for i in range(count)]
    entries[count // 2 : count // 2 + 1] = [b"x" * 150] if count else []  # alone in its batch
    batches = list(add._batches(entries))
    assert [e for b in batches for e in b] == entries
    for i, batch in enumerate(batches):
        assert 0 < len(batch) <= 8
        assert sum(map(len, batch)) <= 100 or len(batch) == 1
        if i + 1 < len(batches) and len(batch) < 8:  # cut by size: the next one did not fit
            assert sum(map(len, batch)) + len(batches[i + 1][0]) > 100
