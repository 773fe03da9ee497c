"""The worker's shared database stays fast however many tests used it: on
a server with autovacuum off (CI's), the reset vacuums a table whose dead
rows piled up, or every later claim walks them (docs/testing.md)."""

from __future__ import annotations

import time

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


# A backend sends its statistics as it exits, which is after the client's
# close() has returned: the count is read until it arrives, within this.
STATISTICS_WAIT_SECONDS = 10.0


def dead_rows_and_vacuums_reaching(
    url: str, table: str, expected: tuple[int, int]
) -> tuple[int, int]:
    """The table's counts as soon as they equal `expected`, or as they
    stand when the wait runs out (and the caller's assertion says so)."""
    deadline = time.monotonic() + STATISTICS_WAIT_SECONDS
    while True:
        counts = dead_rows_and_vacuums(url, table)
        if counts == expected or time.monotonic() >= deadline:
            return counts
        time.sleep(0.05)


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
        piled_up = (VACUUM_AFTER_DEAD_ROWS, 0)
        assert dead_rows_and_vacuums_reaching(shared.url, "tenants", piled_up) == piled_up
        shared.reset()
        # The reset's own DELETE is counted as it closes, after the VACUUM.
        assert dead_rows_and_vacuums(shared.url, "tenants")[1] == 1
        assert shared.clones == 1  # put back, not cloned afresh
    finally:
        shared.close()
