"""The worker's shared database stays fast however many tests used it: on
a server with autovacuum off (CI's), the reset vacuums a table whose dead
rows piled up, or every later claim walks them (docs/testing.md)."""

from __future__ import annotations

import psycopg

from tests.databases import VACUUM_AFTER_DEAD_ROWS, WorkerDatabase


def dead_rows_and_vacuums(url: str, table: str) -> tuple[int, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT n_dead_tup, vacuum_count FROM pg_stat_user_tables WHERE relname = %s",
            (table,),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_reset_vacuums_a_table_whose_dead_rows_piled_up(
    pg_server_url: str, template_db: str
) -> None:
    shared = WorkerDatabase(pg_server_url, template_db).open()
    try:
        with psycopg.connect(shared.url) as conn:  # its statistics are sent as it closes
            conn.execute(
                "INSERT INTO tenants (tenant_id, name)"
                " SELECT 't' || n, 'before' FROM generate_series(1, %s) n",
                (VACUUM_AFTER_DEAD_ROWS,),
            )
            conn.execute("UPDATE tenants SET name = 'after' WHERE name = 'before'")
        assert dead_rows_and_vacuums(shared.url, "tenants") == (VACUUM_AFTER_DEAD_ROWS, 0)
        shared.reset()
        # The reset's own DELETE is counted as it closes, after the VACUUM.
        assert dead_rows_and_vacuums(shared.url, "tenants")[1] == 1
        assert shared.clones == 1  # put back, not cloned afresh
    finally:
        shared.close()
