"""Registers the shared fixtures (fixtures.py) and the seeded randomness (seeding.py).

The fixtures live in a module of their own, not here, so that a test can name their types
(``tests.notary_server``, ``tests.servers``...) without importing a conftest.
"""

pytest_plugins = ["tests.fixtures", "tests.seeding"]
