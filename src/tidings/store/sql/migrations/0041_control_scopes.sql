-- Issue #41, item 1: a rollout goes one region and one purpose at a time.
-- The kill switch and shadow mode are scoped by notification purpose and
-- event class as well as channel and country ('' covers all, as before),
-- so the key takes the two new columns. Existing rows keep covering every
-- purpose and event class.
ALTER TABLE controls
    ADD COLUMN purpose     text NOT NULL DEFAULT '',
    ADD COLUMN event_class text NOT NULL DEFAULT '';
ALTER TABLE controls DROP CONSTRAINT controls_pkey;
ALTER TABLE controls ADD PRIMARY KEY (tenant_id, kind, channel, country, purpose, event_class);

-- Shadow mode may let a live cohort through, the recipients whose
-- stable bucket (domain/rollout.py) is below live_percent. It only grows
-- (store/controls.py refuses a smaller one); the kill switch has none.
ALTER TABLE controls
    ADD COLUMN live_percent smallint NOT NULL DEFAULT 0
        CHECK (live_percent BETWEEN 0 AND 100 AND (kind = 'shadow_mode' OR live_percent = 0));

-- How shadow mode ends: an intent created while shadow mode
-- covered it stays the live system's even when claimed after shadow mode
-- was turned off (docs/replay.md). A control remembers when it was last
-- turned on and off; rows on now count as on since their last change.
ALTER TABLE controls ADD COLUMN enabled_at timestamptz, ADD COLUMN disabled_at timestamptz;
UPDATE controls SET enabled_at = updated_at WHERE enabled;
