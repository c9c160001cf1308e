"""The seeded_rng plugin: a given TEST_SEED replays the choices, a failure reports its seed."""

from __future__ import annotations

import random

import pytest

pytest_plugins = ["pytester"]

INNER = """
def test_choices(seeded_rng):
    print("choices", [seeded_rng.randrange(10**9) for _ in range(3)])
    assert {fail}
"""


def test_a_given_seed_replays_the_same_choices(pytester: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(INNER.format(fail="True"))
    monkeypatch.setenv("TEST_SEED", "1234")
    result = pytester.runpytest_inprocess("-p", "tests.seeding", "-s")
    result.assert_outcomes(passed=1)
    want = random.Random(1234)
    assert f"choices {[want.randrange(10**9) for _ in range(3)]}" in result.stdout.str()


def test_a_failure_reports_the_seed_that_replays_it(pytester: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(INNER.format(fail="False"))
    monkeypatch.delenv("TEST_SEED", raising=False)
    result = pytester.runpytest_inprocess("-p", "tests.seeding")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*random seed*",
                                 "TEST_SEED=*; replay: TEST_SEED=* ./scripts/test *"])
