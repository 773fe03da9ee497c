-- What the last shared round of alert evaluation cost, in seconds of wall
-- time: the next round waits at least that many times over (see
-- alert_round_claim), so that with a million intents due, when the scans
-- take seconds, evaluating never takes more than a small share of the
-- database, however many workers there are.
ALTER TABLE alert_rounds ADD COLUMN took_seconds double precision NOT NULL DEFAULT 0;
