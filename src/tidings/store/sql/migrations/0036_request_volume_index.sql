-- Issue #41, item 3. The request edge counts every request of a
-- user-triggered class in hourly `request_volume` rows of rate_counters
-- (domain/request_limits.py), and the anomaly alert reads the last day of
-- them each round. Claims write many more counter rows (one per recipient
-- key and window), so the scan has an index of its own rows only: a round
-- costs the volume rows of a day, not the day's claims.
CREATE INDEX rate_counters_request_volume ON rate_counters (window_start)
    WHERE scope = 'request_volume';
