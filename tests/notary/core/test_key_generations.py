"""Which root key each log's keys come from, and which logs an emergency roll retired, read
from the registry's freeze reasons (notary.core.logs)."""

from __future__ import annotations

from notary.core.logs import key_generations, retired_by


def test_each_compromised_roll_starts_a_generation_and_retires_the_ones_before() -> None:
    reasons = ["operator", "compromised", "scheduled", "compromised", "operator", None]
    assert key_generations(reasons) == [0, 0, 1, 1, 2, 2]
    # logs 0-1 retired by log 1's roll, 2-3 by log 3's; 4 and the active 5 are the current root
    assert retired_by(reasons) == [1, 1, 3, 3, None, None]


def test_without_a_compromised_roll_nothing_is_retired() -> None:
    assert key_generations([None]) == [0] and retired_by([None]) == [None]
    assert retired_by(["operator", "scheduled", None]) == [None, None, None]
    assert retired_by([]) == []
