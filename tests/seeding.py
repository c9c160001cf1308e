"""``seeded_rng``: randomness a failing test can replay (a pytest plugin, loaded by conftest).

Crash tests choose their kill points and loads at random, which finds more than a fixed
schedule; a failure must still be reproducible. The seed comes from ``TEST_SEED`` when set,
else is fresh; when the test fails, the seed and the command that replays it are added to its
report. (A replay repeats the test's choices, not the machine's timing around them.)
"""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Generator

import pytest

SEED_ENV = "TEST_SEED"
_SEED = pytest.StashKey[int]()


@pytest.fixture
def seeded_rng(request: pytest.FixtureRequest) -> random.Random:
    text = os.environ.get(SEED_ENV, "").strip()
    seed = int(text) if text else secrets.randbits(32)
    request.node.stash[_SEED] = seed
    return random.Random(seed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    seed = item.stash.get(_SEED, None)
    if seed is not None and report.failed:
        report.sections.append(
            ("random seed", f"{SEED_ENV}={seed}; replay: {SEED_ENV}={seed} "
                            f"./scripts/test {item.nodeid}"))
