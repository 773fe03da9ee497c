-- Issue #40: a job may ask for `first_available`, the audited channel
-- fallback its purpose's policy allows (`channel_fallback`,
-- domain/channels.py). The list only grows, so every row passes the new
-- CHECK; jobs has one row per job, so checking them is quick.
ALTER TABLE jobs DROP CONSTRAINT jobs_channel_mode_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_channel_mode_check
    CHECK (channel_mode IN ('preferred', 'all', 'first_available'));
