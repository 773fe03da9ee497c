-- When the alert conditions were last evaluated, across every worker: each
-- worker ticks on its own timer, and an advisory lock only kept two from
-- evaluating at the same moment, so N workers scanned the ledger N times an
-- interval. At a million due intents one evaluation is seconds of database
-- time; it now happens once an interval, whoever does it.
CREATE TABLE alert_rounds (
    scope   text        PRIMARY KEY,
    last_at timestamptz NOT NULL
);
