-- name: wake_workers
-- The waker's NOTIFY (store/wakeups.py), a transaction of its own that
-- writes nothing else: its commit need not wait for the WAL to reach disk
-- (a wake-up lost in a crash costs latency, never an intent), so the
-- notification queue's lock is held for as short a time as it can be.
SELECT set_config('synchronous_commit', 'off', true), pg_notify('tidings_due', c)
FROM unnest(%(channels)s::text[]) AS c;

-- name: listen_for_due_work
LISTEN tidings_due
