-- name: insert_audience_upload
-- Written before its members (they refer to it); size and version are
-- settled once the last member is in (version '' until then).
INSERT INTO audience_uploads (tenant_id, id, size, version, created_by, created_at, expires_at)
VALUES (%(tenant_id)s, %(id)s, 0, '', %(actor)s, %(now)s, %(expires_at)s);

-- name: count_pending_audience_uploads
-- A tenant's uploads no job has used yet, in progress or settled, and not
-- expired: what jobs/uploads.py bounds per tenant.
SELECT count(*) AS n FROM audience_uploads
WHERE tenant_id = %(tenant_id)s AND consumed_at IS NULL AND expires_at > %(now)s;

-- name: settle_audience_upload
UPDATE audience_uploads SET size = %(size)s, version = %(version)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s
RETURNING id, size, version, created_at, expires_at;

-- name: audience_upload_duplicate
-- Found once the upload is in, so the members never have to fit in memory
-- together: the first ref seen twice, at the line it came back.
SELECT recipient_ref, min(seq) AS first, (array_agg(seq ORDER BY seq))[2] AS again
FROM audience_upload_members
WHERE tenant_id = %(tenant_id)s AND upload_id = %(id)s
GROUP BY recipient_ref
HAVING count(*) > 1
ORDER BY again
LIMIT 1;

-- name: lock_audience_upload
-- Two jobs naming one upload serialize here; the second sees it consumed.
-- One still being staged (its version not settled) is not there yet.
SELECT * FROM audience_uploads
WHERE tenant_id = %(tenant_id)s AND id = %(id)s AND expires_at > %(now)s AND version <> ''
FOR UPDATE;

-- name: consume_audience_upload
-- The frozen audience now holds what the job needs; the staged copies of
-- the destinations go at once rather than waiting for expiry.
WITH gone AS (
    DELETE FROM audience_upload_members
    WHERE tenant_id = %(tenant_id)s AND upload_id = %(id)s
)
UPDATE audience_uploads SET job_id = %(job_id)s, consumed_at = %(now)s
WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: discard_audience_upload
DELETE FROM audience_uploads WHERE tenant_id = %(tenant_id)s AND id = %(id)s;

-- name: copy_audience_upload_members
COPY audience_upload_members (tenant_id, upload_id, seq, recipient_ref, phone_hash, phone_ciphertext, phone_country, email_hash, email_ciphertext, timezone, locale, preferences, variables) FROM STDIN
