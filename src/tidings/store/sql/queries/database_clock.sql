-- name: database_time
-- The server's time now, not the transaction's start (store/database_clock.py).
SELECT clock_timestamp() AS now;
