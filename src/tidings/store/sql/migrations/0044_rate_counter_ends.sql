-- A rate counter knows when its window ends, so retention can forget it
-- (issue 41: the request edge writes a row per destination and window, and
-- nothing ever removed one; a pumping script could grow the table without
-- end). Rows from before know only their start: they are given the longest
-- window a policy may set (366 days), so none is forgotten early.
ALTER TABLE rate_counters ADD COLUMN window_end timestamptz;
UPDATE rate_counters SET window_end = window_start + interval '366 days';
ALTER TABLE rate_counters ALTER COLUMN window_end SET NOT NULL;
CREATE INDEX rate_counters_ended ON rate_counters (window_end);
