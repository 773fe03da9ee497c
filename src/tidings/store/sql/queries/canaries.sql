-- name: canary_record
-- One canary's answer. Two rounds never share an instant per account and
-- channel (the round is claimed once per interval); a repeat keeps the first.
INSERT INTO canary_results (account, channel, at, target, ok, code, answer)
VALUES (%(account)s, %(channel)s, %(at)s, %(target)s, %(ok)s, %(code)s, %(answer)s)
ON CONFLICT (account, channel, at) DO NOTHING;

-- name: canary_latest
-- The newest answer per account and channel: what the alert, the metrics
-- and the console show. One index probe per pair through the primary key.
SELECT DISTINCT ON (account, channel) account, channel, at, target, ok, code, answer
FROM canary_results
ORDER BY account, channel, at DESC;

-- name: canary_purge
-- Answers older than the cutoff; the newest per pair is always kept.
DELETE FROM canary_results r
WHERE r.at < %(before)s
  AND EXISTS (SELECT 1 FROM canary_results n
              WHERE n.account = r.account AND n.channel = r.channel AND n.at > r.at);
