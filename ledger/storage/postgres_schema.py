"""The log's tables in a PostgreSQL database (``ledger.storage.postgres``): the versioned
migrations that create them, and the compression their tile data is stored with."""

from __future__ import annotations

__all__ = ["LEDGER_MIGRATIONS", "lz4"]


def lz4(suffix: str) -> str:
    """A log's tile data compressed with LZ4 rather than PostgreSQL's default pglz: a
    commit's bundle part (a batch's entries, past the 2 kB where values are compressed) then
    costs the server about half the CPU, for the same size. A server built without LZ4, or
    older than PostgreSQL 14, keeps pglz (the statements are dynamic, so that the error is one
    to catch)."""
    return f"""
    DO $$ BEGIN
        EXECUTE 'ALTER TABLE ledger_tiles{suffix} ALTER COLUMN data SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE ledger_tile_parts{suffix} ALTER COLUMN data SET COMPRESSION lz4';
    EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
        NULL;
    END $$;
    """


# Versioned schema of the log. Each entry upgrades from the version before it; never edit one
# that has shipped, append a new one.
LEDGER_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE ledger_tiles (
        level smallint NOT NULL, idx bigint NOT NULL, data bytea NOT NULL,
        PRIMARY KEY (level, idx));
    CREATE TABLE ledger_state (
        one smallint PRIMARY KEY CHECK (one = 1),
        size bigint, time double precision, note bytea,
        history_time double precision NOT NULL DEFAULT '-infinity');
    INSERT INTO ledger_state (one) VALUES (1);
    CREATE TABLE ledger_checkpoints (
        size bigint PRIMARY KEY, time double precision NOT NULL, note bytea NOT NULL);
    CREATE TABLE ledger_witness_sizes (vkey text PRIMARY KEY, size bigint NOT NULL);
    CREATE TABLE ledger_witness_published (
        one smallint PRIMARY KEY CHECK (one = 1), note bytea);
    CREATE TABLE ledger_write_probe (one smallint PRIMARY KEY CHECK (one = 1), data bytea);
    """,
    # Version 2: a right-edge tile or bundle grows by appended parts (ledger.core.tileparts)
    # instead of being rewritten, with its TOAST chunks and WAL, by every commit; reads go
    # through ledger_tile_data, each tile's row followed by its parts.
    """
    CREATE TABLE ledger_tile_parts (
        level smallint NOT NULL, idx bigint NOT NULL, start smallint NOT NULL,
        data bytea NOT NULL, PRIMARY KEY (level, idx, start));
    CREATE VIEW ledger_tile_data AS
    SELECT t.level, t.idx, t.data || COALESCE(
        (SELECT string_agg(p.data, ''::bytea ORDER BY p.start) FROM ledger_tile_parts p
         WHERE p.level = t.level AND p.idx = t.idx), ''::bytea) AS data
    FROM ledger_tiles t;
    """,
    # Version 3: a sequence of logs (DESIGN-33). The registry; log 0's state row, the one
    # write lock of every log, says which log is active, so that a writer that waited for the
    # lock reads the active log from the row it locked (fresh under READ COMMITTED, where a
    # joined or sub-selected table would be read as of before the wait).
    """
    CREATE TABLE ledger_logs (
        n integer PRIMARY KEY, origin text NOT NULL UNIQUE, shard text NOT NULL,
        state text NOT NULL CHECK (state IN ('active', 'frozen')),
        started double precision NOT NULL, frozen_at double precision, final_size bigint,
        min_index bigint NOT NULL DEFAULT 0, vkeys text NOT NULL, reason text);
    ALTER TABLE ledger_state ADD COLUMN active_log integer NOT NULL DEFAULT 0;
    """,
    # Version 4: each frozen log's final checkpoint with the cosignatures collected for it
    # (ledger.jobs.final_checkpoint), kept until every witness and mirror has cosigned it.
    """
    CREATE TABLE ledger_witness_finals (origin text PRIMARY KEY, note bytea NOT NULL);
    """,
    # Version 5: tiles and bundles compressed with LZ4 (lz4), the rows written from now on.
    lz4(""),
)
