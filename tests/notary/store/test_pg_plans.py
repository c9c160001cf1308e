"""The plans PostgreSQL keeps for the notary's statements (benchmarks/docs/pg_frontends.md).

A statement that asyncpg prepares is planned for its first executions, then given one generic
plan, made from the tables' sizes at that moment and kept for as long as the connection lives
and no analyze of those tables invalidates it. On a new database that moment comes a few
batches in: a screen planned against a few hundred receipts chose to scan every row of
``notary_receipts`` and went on doing so at every batch as the table grew, until autovacuum
next analyzed it. The store's sessions rule sequential scans out where an index serves.
"""

from __future__ import annotations

import asyncpg

from notary.store.postgres import PgNotaryStore
from notary.store.postgres_schema import SCREEN

SMALL = 400  # receipts when the plan is made: a few batches into a new log


def _array(values: range) -> str:
    return "{" + ",".join(map(str, values)) + "}"


async def test_a_screen_planned_while_the_log_is_small_looks_digests_up_by_index(
        pg_url: str) -> None:
    store = await PgNotaryStore.open(pg_url)
    try:
        async def plan(conn: asyncpg.Connection) -> str:
            # Receipts' rows as a new log has them, analyzed when it had none (autovacuum's
            # first visit), then the screen run as a frontend runs it, until its plan is
            # the generic one it keeps.
            await conn.execute("ANALYZE notary_receipts")
            await conn.execute(
                "INSERT INTO notary_receipts SELECT g, '\\x00', 1, 1, 1, 1, 1, g, g * 7919 "
                "FROM generate_series(0, $1 - 1) g", SMALL)
            await conn.execute(
                "PREPARE screen(bigint[], text[], text[], text[], text[]) AS " + SCREEN)
            for batch in range(6):
                digests = _array(range(10**6 + 64 * batch, 10**6 + 64 * (batch + 1)))
                await conn.fetch(f"EXECUTE screen('{digests}', '{{}}', '{{}}', '{{x}}', '{{x}}')")
            rows = await conn.fetch(
                f"EXPLAIN EXECUTE screen('{_array(range(3))}', '{{}}', '{{}}', '{{x}}', '{{x}}')")
            await conn.execute("DEALLOCATE screen")
            return "\n".join(r[0] for r in rows)

        text = await store._retrying(plan)  # on one of the store's own sessions
    finally:
        await store.close()
    assert "$1" in text, text  # the generic plan: the one every later batch runs
    assert "Seq Scan on notary_receipts" not in text, text
    assert "notary_receipts_by_digest" in text, text


async def test_a_statement_with_no_index_to_use_is_not_compiled(pg_url: str) -> None:
    """Without sequential scans, a plan that needs one anyway (no index serves its order)
    costs more than the JIT threshold, and PostgreSQL would compile it at every execution
    (0.3-0.5 s for the API keys' reload); the store's sessions have JIT off."""
    store = await PgNotaryStore.open(pg_url)
    try:
        plan = await store._retrying(lambda conn: conn.fetchval(
            "EXPLAIN (ANALYZE, FORMAT JSON) "
            "SELECT kid, jwk, created FROM notary_receipt_keys ORDER BY created, id"))
    finally:
        await store.close()
    assert '"JIT"' not in plan, plan
