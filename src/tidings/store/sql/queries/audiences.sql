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

-- name: store_upload_destinations
INSERT INTO destinations (tenant_id, destination_hash, channel, ciphertext, country, created_at)
SELECT DISTINCT ON (tenant_id, destination_hash) tenant_id, destination_hash, channel,
       ciphertext, country, %(now)s
FROM (
    SELECT tenant_id, phone_hash AS destination_hash, 'sms' AS channel,
           phone_ciphertext AS ciphertext, phone_country AS country
    FROM audience_upload_members
    WHERE tenant_id = %(tenant_id)s AND upload_id = %(id)s AND phone_hash IS NOT NULL
    UNION ALL
    SELECT tenant_id, email_hash, 'email', email_ciphertext, NULL
    FROM audience_upload_members
    WHERE tenant_id = %(tenant_id)s AND upload_id = %(id)s AND email_hash IS NOT NULL
) staged
ON CONFLICT (tenant_id, destination_hash) DO NOTHING;

-- name: freeze_upload_recipients
-- The same rows the inline path writes: a member named only by ref takes
-- destinations, time zone, locale and preferences from its contact record
-- as this transaction sees it; a member with a destination of its own
-- takes nothing from the contact.
INSERT INTO job_recipients (tenant_id, job_id, seq, recipient_ref, phone_hash, email_hash,
                            phone_country, email_country, timezone, locale, preferences,
                            variables)
SELECT m.tenant_id, %(job_id)s, row_number() OVER (ORDER BY m.seq), m.recipient_ref,
       coalesce(m.phone_hash, c.phone_hash), coalesce(m.email_hash, c.email_hash),
       m.phone_country, NULL,
       coalesce(m.timezone, c.timezone), coalesce(m.locale, c.locale),
       CASE
           WHEN cardinality(m.preferences) > 0 THEN m.preferences
           WHEN jsonb_typeof(c.preferences -> 'channels') = 'array'
               THEN ARRAY(SELECT jsonb_array_elements_text(c.preferences -> 'channels'))
           ELSE '{}'
       END,
       m.variables
FROM audience_upload_members m
LEFT JOIN contacts c
       ON c.tenant_id = m.tenant_id AND c.ref = m.recipient_ref
      AND m.phone_hash IS NULL AND m.email_hash IS NULL
WHERE m.tenant_id = %(tenant_id)s AND m.upload_id = %(id)s;

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
